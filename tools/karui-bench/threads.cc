/*
 * karui-bench-threads — uproc.threads' own threaded program (exp_uprun.c):
 * a CPU-bound loop of N steps split over two std::threads, which make no
 * system call while they compute.  It prints the two halves' results and
 * their sum, the same on every run.  Built as a plain PIE with no
 * sanitizer, like karui-bench-uprog.
 *
 *   karui-bench-threads N
 */
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <thread>

/* N steps of xorshift64*, from a seed of its own per half */
static std::uint64_t work(std::uint64_t seed, long n)
{
	std::uint64_t x = seed, sum = 0;
	for (long i = 0; i < n; i++) {
		x ^= x >> 12;
		x ^= x << 25;
		x ^= x >> 27;
		sum += x * 0x2545F4914F6CDD1DULL;
	}
	return sum;
}

int main(int argc, char **argv)
{
	long n = argc == 2 ? std::atol(argv[1]) : 0;
	if (n <= 0) {
		std::fprintf(stderr, "usage: karui-bench-threads N\n");
		return 2;
	}
	std::uint64_t r[2];
	std::thread t([&] { r[1] = work(0x9E3779B97F4A7C15ULL, n / 2); });
	r[0] = work(0xD1B54A32D192ED03ULL, n - n / 2);
	t.join();
	std::printf("%016llx %016llx %016llx\n", (unsigned long long)r[0], (unsigned long long)r[1],
		    (unsigned long long)(r[0] + r[1]));
	return 0;
}
