/*
 * Boost.Fiber peers (Boost 1.74, default round_robin scheduler, one thread).
 * A fiber switch goes through the scheduler's ready queue and Boost.Context's
 * fcontext assembly; no system call.
 *   yield        two fibers calling boost::this_fiber::yield() alternately;
 *                one operation = one yield
 *   create_join  boost::fibers::fiber + join, one at a time, with one
 *                pooled_fixedsize_stack (64 KiB stacks) made outside the loop
 *   create_batch a->n fibers, then join all
 *   many         a->n fibers blocked on a fibers::condition_variable; create
 *                time per fiber and RSS growth while all are alive
 *   mutex        fibers::mutex lock + unlock in the main fiber
 *   monitor      lock, fibers::condition_variable::notify_one with no waiter,
 *                unlock
 *   condvar_pingpong  the main fiber and one fiber, one fibers::mutex, a
 *                condition_variable each and a turn counter; one operation =
 *                one round trip
 *   chan_pingpong, rendezvous  the main fiber pushes v into one
 *                unbuffered_channel<int> and pops the answer from another; a
 *                server fiber pops v and pushes it back (chan_pingpong) or
 *                pushes v + 1 (rendezvous: here an entry call is just that
 *                push and pop); one operation = one round trip
 * create_batch and many size the pool to a->n stacks at once (otherwise it
 * grows 32, 64, ... and overshoots).  The pool writes a free-list link into
 * every stack it carves, so in "many" each stack costs a page at its bottom
 * as well as the pages its fiber touches at the top.  Every call makes a new
 * pool; create_batch runs one untimed batch first so that the timed one
 * reuses warm stacks (steady state, as create_join), while "many" measures
 * fresh memory, page faults included.
 * Fibers are launched with launch::post: a new fiber first runs when the
 * creating fiber blocks (in join or wait).
 *
 * t1_* (seed004.table1, the marks in peers.h): create = constructing a
 * fiber (launch::post, the pooled stack warm); switch = this_fiber::yield;
 * stop = context::suspend() of the active fiber, which is what a blocking
 * primitive of Boost.Fiber calls; resume = context::schedule(ctx) of a
 * suspended one, which is what its wakeups call; exit = a fiber's function
 * returning, up to the return of its join.
 *
 * skynet runs on Boost.Fiber's multi-thread scheduler, work_stealing, on two
 * threads, with fixedsize_stack (64 KiB, from malloc: the pooled allocator
 * is not thread-safe) and launch::dispatch, as Boost's own skynet programs
 * do: a new fiber runs at once.  With the default launch::post the FIFO
 * ready queues would hold all 1,111,111 fibers at once, two touched pages
 * each.  work_stealing can be set up once per process only, so each run
 * forks a child that sets it up, builds the tree and reports through a
 * pipe.
 */
#include <atomic>
#include <cerrno>
#include <climits>
#include <cstdint>
#include <mutex>
#include <new>
#include <system_error>
#include <thread>
#include <vector>

#include <sys/wait.h>
#include <unistd.h>

#include <boost/fiber/all.hpp>

#include "peers.h"

namespace bf = boost::fibers;

namespace {

constexpr std::size_t fib_stack = 64 * 1024;
volatile long fib_sink;

void fib_empty()
{
	fib_sink = fib_sink + 1;
}

/* errno code for the exception being handled */
int fib_error()
{
	try {
		throw;
	} catch (const std::bad_alloc &) {
		return ENOMEM;
	} catch (const std::system_error &e) {
		const std::error_category &c = e.code().category();
		bool is_errno = c == std::generic_category() || c == std::system_category();
		return is_errno && e.code().value() ? e.code().value() : EAGAIN;
	} catch (...) {
		return EAGAIN;
	}
}

/* Run body on two fibers to their end: 0, or the error of making them. */
template <class F> int run_two(F body)
{
	bf::fiber f1, f2;
	try {
		f1 = bf::fiber(body);
		f2 = bf::fiber(body);
	} catch (...) {
		int e = fib_error();
		if (f1.joinable())
			f1.join(); /* it yields to itself until done */
		return e;
	}
	f1.join();
	f2.join();
	return 0;
}

void join_all(std::vector<bf::fiber> &fs)
{
	for (bf::fiber &f : fs)
		f.join();
	fs.clear();
}

/* create n fibers into fs, then join all; returns the time taken in ns */
double batch_once(bf::pooled_fixedsize_stack &salloc, std::vector<bf::fiber> &fs, long n)
{
	double t0 = kb_now_ns();
	try {
		for (long i = 0; i < n; i++)
			fs.emplace_back(std::allocator_arg, salloc, fib_empty);
	} catch (...) {
		join_all(fs);
		throw;
	}
	join_all(fs);
	return kb_now_ns() - t0;
}

struct many_state {
	bf::mutex mu;
	bf::condition_variable started_cv; /* fibers -> main */
	bf::condition_variable go_cv;      /* main -> fibers */
	long n = 0;
	long started = 0;
	bool released = false;
};

void many_body(many_state *m)
{
	std::unique_lock<bf::mutex> lk(m->mu);
	if (++m->started == m->n)
		m->started_cv.notify_one();
	m->go_cv.wait(lk, [m] { return m->released; });
}

void many_release(many_state &m, std::vector<bf::fiber> &fs)
{
	{
		std::unique_lock<bf::mutex> lk(m.mu);
		m.released = true;
	}
	m.go_cv.notify_all();
	join_all(fs);
}

struct pingpong {
	bf::mutex mu;
	bf::condition_variable cv[2]; /* cv[i]: flow i's turn has come */
	long turn = 0, end = 0;       /* flow turn % 2 passes it on, up to end */
};

void cv_flow(pingpong *s, long me)
{
	std::unique_lock<bf::mutex> lk(s->mu);
	for (;;) {
		s->cv[me].wait(lk, [s, me] { return (s->turn & 1) == me || s->turn >= s->end; });
		if (s->turn >= s->end)
			return;
		s->turn++;
		s->cv[1 - me].notify_one();
	}
}

using int_chan = bf::unbuffered_channel<int>;
constexpr bf::channel_op_status chan_ok = bf::channel_op_status::success;

/* the server fiber: pop v from in, push v + add to out, until in closes */
void chan_serve(int_chan *in, int_chan *out, int add)
{
	int v;
	while (in->pop(v) == chan_ok && out->push(v + add) == chan_ok)
		continue;
}

/* a->iters round trips from the main fiber through chan_serve; the value
 * that comes back last must be a->iters * add (EIO otherwise) */
int chan_round_trips(const kb_args *a, kb_res *r, int add)
{
	if (a->iters < 1)
		return EINVAL;
	try {
		int_chan req, rep;
		bf::fiber server(chan_serve, &req, &rep, add);
		bool ok = true;
		int v = 0;
		double t0 = kb_now_ns();
		for (long i = 0; i < a->iters && ok; i++)
			ok = req.push(v) == chan_ok && rep.pop(v) == chan_ok;
		double t1 = kb_now_ns();
		req.close();
		server.join();
		if (!ok || v != a->iters * add)
			return EIO;
		r->ns_per_op = (t1 - t0) / double(a->iters);
	} catch (...) {
		return fib_error();
	}
	return 0;
}

/* chan_relay: both fibers run relay (see exp_sync.c); fiber 0 starts the
 * token and keeps the last one, which must be the number of rounds */
__attribute__((noinline)) void relay(int_chan *c, int me, long iters, long *end)
{
	int v = 0;
	if (me == 0 && c[1].push(v) != chan_ok)
		return;
	for (long i = 0; i < iters; i++) {
		if (c[me].pop(v) != chan_ok)
			return;
		v += me;
		if ((me || i + 1 < iters) && c[!me].push(v) != chan_ok)
			return;
	}
	if (me == 0)
		*end = v;
}

} // namespace

extern "C" int kb_fiber_yield(const kb_args *a, kb_res *r)
{
	struct {
		long iters, count;
		double t0, t1;
	} s = { a->iters, 0, 0, 0 };
	auto body = [&s] {
		while (s.count < s.iters) {
			if (s.count == 0)
				s.t0 = kb_now_ns();
			s.count++;
			boost::this_fiber::yield();
		}
		if (s.t1 == 0)
			s.t1 = kb_now_ns();
	};

	if (a->iters < 1)
		return EINVAL;
	if (int e = run_two(body))
		return e;
	r->ns_per_op = (s.t1 - s.t0) / double(a->iters);
	return 0;
}

extern "C" int kb_fiber_create_join(const kb_args *a, kb_res *r)
{
	if (a->iters < 1)
		return EINVAL;
	try {
		bf::pooled_fixedsize_stack salloc(fib_stack);
		double t0 = kb_now_ns();
		for (long i = 0; i < a->iters; i++) {
			bf::fiber f(std::allocator_arg, salloc, fib_empty);
			f.join();
		}
		r->ns_per_op = (kb_now_ns() - t0) / double(a->iters);
	} catch (...) {
		return fib_error();
	}
	return 0;
}

extern "C" int kb_fiber_create_batch(const kb_args *a, kb_res *r)
{
	if (a->n < 1)
		return EINVAL;
	try {
		bf::pooled_fixedsize_stack salloc(fib_stack, size_t(a->n));
		std::vector<bf::fiber> fs;
		fs.reserve(size_t(a->n));
		batch_once(salloc, fs, a->n); /* warm-up: carve and fault the pool */
		r->ns_per_op = batch_once(salloc, fs, a->n) / double(a->n);
	} catch (...) {
		return fib_error();
	}
	return 0;
}

extern "C" int kb_fiber_many(const kb_args *a, kb_res *r)
{
	if (a->n < 1)
		return EINVAL;
	try {
		bf::pooled_fixedsize_stack salloc(fib_stack, size_t(a->n));
		std::vector<bf::fiber> fs;
		many_state m;
		m.n = a->n;
		fs.reserve(size_t(a->n));
		double rss0 = kb_rss_kib();
		double t0 = kb_now_ns();
		try {
			for (long i = 0; i < a->n; i++)
				fs.emplace_back(std::allocator_arg, salloc, many_body, &m);
		} catch (...) {
			many_release(m, fs);
			throw;
		}
		double t1 = kb_now_ns();
		{
			std::unique_lock<bf::mutex> lk(m.mu);
			m.started_cv.wait(lk, [&m] { return m.started == m.n; });
		}
		double rss1 = kb_rss_kib();
		many_release(m, fs);
		r->ns_per_op = (t1 - t0) / double(a->n);
		r->rss_kib = rss1 - rss0;
	} catch (...) {
		return fib_error();
	}
	return 0;
}

extern "C" int kb_fiber_mutex(const kb_args *a, kb_res *r)
{
	if (a->iters < 1)
		return EINVAL;
	try {
		bf::mutex mu;
		double t0 = kb_now_ns();
		for (long i = 0; i < a->iters; i++) {
			mu.lock();
			mu.unlock();
		}
		r->ns_per_op = (kb_now_ns() - t0) / double(a->iters);
	} catch (...) {
		return fib_error();
	}
	return 0;
}

extern "C" int kb_fiber_monitor(const kb_args *a, kb_res *r)
{
	if (a->iters < 1)
		return EINVAL;
	try {
		bf::mutex mu;
		bf::condition_variable cv;
		double t0 = kb_now_ns();
		for (long i = 0; i < a->iters; i++) {
			mu.lock();
			cv.notify_one();
			mu.unlock();
		}
		r->ns_per_op = (kb_now_ns() - t0) / double(a->iters);
	} catch (...) {
		return fib_error();
	}
	return 0;
}

extern "C" int kb_fiber_condvar_pingpong(const kb_args *a, kb_res *r)
{
	if (a->iters < 1)
		return EINVAL;
	try {
		pingpong s;
		s.end = 2 * a->iters;
		bf::fiber b(cv_flow, &s, 1L);
		double t0 = kb_now_ns();
		cv_flow(&s, 0); /* end is even: returns when the last round is back */
		double t1 = kb_now_ns();
		b.join();
		r->ns_per_op = (t1 - t0) / double(a->iters);
	} catch (...) {
		return fib_error();
	}
	return 0;
}

extern "C" int kb_fiber_chan_pingpong(const kb_args *a, kb_res *r)
{
	return chan_round_trips(a, r, 0);
}

extern "C" int kb_fiber_chan_relay(const kb_args *a, kb_res *r)
{
	if (a->iters < 1 || a->iters > INT_MAX)
		return EINVAL;
	try {
		int_chan c[2];
		long end = -1;
		bf::fiber b(relay, c, 1, a->iters, &end);
		double t0 = kb_now_ns();
		relay(c, 0, a->iters, &end);
		double t1 = kb_now_ns();
		b.join();
		if (end != a->iters)
			return EIO;
		r->ns_per_op = (t1 - t0) / double(a->iters);
	} catch (...) {
		return fib_error();
	}
	return 0;
}

extern "C" int kb_fiber_rendezvous(const kb_args *a, kb_res *r)
{
	return chan_round_trips(a, r, 1);
}

/* ---- skynet (see the top) ---- */

namespace {

/* created and ended fibers, per thread: each slot has one writer */
struct alignas(64) sky_count {
	std::atomic<long> made{ 0 }, ended{ 0 };
};
sky_count sky_cnt[2];
thread_local int sky_thread;
std::atomic<long> sky_peak{ 0 };

/* noinline: a fiber may resume on the other thread, so the thread-local
 * index is looked up afresh on every call */
__attribute__((noinline)) void sky_count_add(bool made)
{
	std::atomic<long> &c = made ? sky_cnt[sky_thread].made : sky_cnt[sky_thread].ended;
	c.store(c.load(std::memory_order_relaxed) + 1, std::memory_order_release);
}

/* as karui's (exp_karui.c): ends first, so the sum is an upper bound, and
 * a reading stretched by a preemption is dropped */
void sky_sample()
{
	long live = 0;
	double t0 = kb_now_ns();
	for (sky_count &c : sky_cnt)
		live -= c.ended.load(std::memory_order_acquire);
	for (sky_count &c : sky_cnt)
		live += c.made.load(std::memory_order_relaxed);
	if (kb_now_ns() - t0 > 20000)
		return;
	long p = sky_peak.load(std::memory_order_relaxed);
	while (live > p && !sky_peak.compare_exchange_weak(p, live, std::memory_order_relaxed))
		continue;
}

void sky(bf::fixedsize_stack &salloc, std::uint64_t num, std::uint64_t size,
	 std::uint64_t *out)
{
	if (size == 1) {
		if (num % KB_SKYNET_SAMPLE == 0)
			sky_sample();
		*out = num;
		return;
	}
	std::uint64_t res[KB_SKYNET_DIV];
	bf::fiber f[KB_SKYNET_DIV];
	std::uint64_t sub = size / KB_SKYNET_DIV;
	for (int i = 0; i < KB_SKYNET_DIV; i++) {
		sky_count_add(true);
		f[i] = bf::fiber(bf::launch::dispatch, std::allocator_arg, salloc,
				 [&salloc, &res, i, num, sub] {
					 sky(salloc, num + i * sub, sub, &res[i]);
					 sky_count_add(false);
				 });
	}
	std::uint64_t sum = 0;
	for (int i = 0; i < KB_SKYNET_DIV; i++) {
		f[i].join();
		sum += res[i];
	}
	*out = sum;
}

struct sky_report {
	int err;
	double ns, peak;
};

/* In the forked child: two threads on work_stealing, one tree. */
sky_report sky_child(long leaves)
{
	sky_report rep{ 0, 0, 0 };
	std::mutex mu;
	bf::condition_variable_any cv;
	bool done = false;
	try {
		std::thread helper([&] {
			sky_thread = 1;
			bf::use_scheduling_algorithm<bf::algo::work_stealing>(2);
			std::unique_lock<std::mutex> lk(mu);
			cv.wait(lk, [&] { return done; });
		});
		sky_thread = 0;
		bf::use_scheduling_algorithm<bf::algo::work_stealing>(2);
		bf::fixedsize_stack salloc(64 * 1024);
		std::uint64_t sum = 0;
		double t0 = kb_now_ns();
		sky(salloc, 0, std::uint64_t(leaves), &sum);
		rep.ns = kb_now_ns() - t0;
		rep.peak = double(sky_peak.load());
		if (sum != std::uint64_t(leaves) * std::uint64_t(leaves - 1) / 2)
			rep.err = EIO;
		{
			std::unique_lock<std::mutex> lk(mu);
			done = true;
		}
		cv.notify_all();
		helper.join();
	} catch (...) {
		rep.err = fib_error();
	}
	return rep;
}

} // namespace

extern "C" int kb_fiber_skynet(const kb_args *a, kb_res *r)
{
	long leaves = 1;
	while (leaves < a->n)
		leaves *= KB_SKYNET_DIV;
	if (leaves != a->n)
		return EINVAL; /* a power of 10 */
	int fd[2];
	if (pipe(fd) != 0)
		return errno;
	pid_t pid = fork();
	if (pid < 0) {
		int e = errno;
		close(fd[0]);
		close(fd[1]);
		return e;
	}
	if (pid == 0) {
		close(fd[0]);
		sky_report rep = sky_child(leaves);
		_exit(write(fd[1], &rep, sizeof rep) == sizeof rep ? 0 : 1);
	}
	close(fd[1]);
	sky_report rep{ EIO, 0, 0 };
	ssize_t got = read(fd[0], &rep, sizeof rep);
	close(fd[0]);
	int st = 0;
	waitpid(pid, &st, 0);
	if (got != ssize_t(sizeof rep) || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
		return EIO;
	if (rep.err)
		return rep.err;
	r->ns_per_op = rep.ns;
	r->peak = rep.peak;
	return 0;
}

namespace {

void fib_chain(long d, long n)
{
	if (d < n) {
		bf::fiber f(fib_chain, d + 1, n);
		f.join();
	}
}

} // namespace

/* seed000.table2: fibers with Boost's default stack allocator, each
 * creating the next and joining it */
extern "C" int kb_fiber_chain(const kb_args *a, kb_res *r)
{
	if (a->n < 1 || a->iters < 1)
		return EINVAL;
	try {
		double t0 = kb_now_ns();
		bf::fiber(fib_chain, 1L, a->n).join();
		double t1 = kb_now_ns();
		for (long i = 0; i < a->iters; i++)
			bf::fiber(fib_chain, 1L, a->n).join();
		double t2 = kb_now_ns();
		r->ns_per_op = (t1 - t0) / double(a->n);
		r->ns_cached = (t2 - t1) / double(a->n * a->iters);
	} catch (...) {
		return fib_error();
	}
	return 0;
}

/* ---- seed004.table1 (see the top) ---- */

namespace {

void t1_nop() {}
void t1_exiting() { kb_mark_on(); }

/* create: the constructor alone; exit: from the function's return to the
 * return of its join */
int t1_life(const kb_args *a, bool exit)
{
	if (a->iters < 1)
		return EINVAL;
	try {
		bf::pooled_fixedsize_stack salloc(fib_stack);
		for (int i = 0; i < 64; i++) /* warm the pool */
			bf::fiber(std::allocator_arg, salloc, t1_nop).join();
		for (long i = 0; i < a->iters; i++) {
			if (exit) {
				bf::fiber f(std::allocator_arg, salloc, t1_exiting);
				f.join();
				kb_mark_off();
			} else {
				kb_mark_on();
				bf::fiber f(std::allocator_arg, salloc, t1_nop);
				kb_mark_off();
				f.join();
			}
		}
	} catch (...) {
		return fib_error();
	}
	return 0;
}


/* Two fibers wake each other and park, a->iters parks in all; with
 * `resume` the wakeups are marked, else the parks.  The main fiber is one
 * of them. */
struct t1_pp {
	bf::context *main = nullptr, *other = nullptr;
	long rounds = 0;
	bool resume = false;
};

void t1_wake(bf::context *self, bf::context *to, bool marked)
{
	if (marked)
		kb_mark_on();
	self->schedule(to);
	if (marked)
		kb_mark_off();
}

void t1_park(bf::context *self, bool marked)
{
	if (marked)
		kb_mark_on();
	self->suspend();
	if (marked)
		kb_mark_off();
}

void t1_other(t1_pp *p)
{
	bf::context *self = bf::context::active();
	p->other = self;
	self->suspend(); /* until the main fiber's first wakeup */
	for (long i = 0; i < p->rounds; i++) {
		t1_wake(self, p->main, p->resume);
		if (i + 1 == p->rounds)
			break;
		t1_park(self, !p->resume);
	}
}

int t1_pingpong(const kb_args *a, bool resume)
{
	if (a->iters < 2)
		return EINVAL;
	try {
		t1_pp p;
		p.main = bf::context::active();
		p.rounds = a->iters / 2;
		p.resume = resume;
		bf::fiber b(t1_other, &p);
		boost::this_fiber::yield(); /* b runs and parks */
		for (long i = 0; i < p.rounds; i++) {
			t1_wake(p.main, p.other, resume);
			t1_park(p.main, !resume);
		}
		b.join();
	} catch (...) {
		return fib_error();
	}
	return 0;
}

} // namespace

extern "C" int kb_fiber_t1_create(const kb_args *a, kb_res *)
{
	return t1_life(a, false);
}

extern "C" int kb_fiber_t1_exit(const kb_args *a, kb_res *)
{
	return t1_life(a, true);
}

extern "C" int kb_fiber_t1_switch(const kb_args *a, kb_res *)
{
	if (a->iters < 2)
		return EINVAL;
	long each = a->iters / 2;
	auto body = [each] {
		for (long i = 0; i < each; i++) {
			kb_mark_on();
			boost::this_fiber::yield();
			kb_mark_off();
		}
	};
	return run_two(body);
}

extern "C" int kb_fiber_t1_stop(const kb_args *a, kb_res *)
{
	return t1_pingpong(a, false);
}

extern "C" int kb_fiber_t1_resume(const kb_args *a, kb_res *)
{
	return t1_pingpong(a, true);
}

extern "C" int kb_fiber_t1_marks(const kb_args *a, kb_res *)
{
	for (long i = 0; i < a->iters; i++) {
		kb_mark_on();
		kb_mark_off();
	}
	return 0;
}
