/*
 * pku_probe: do this CPU and kernel give user space protection keys (Intel
 * PKU) that behave as a domain layer needs them to?  A key from pkey_alloc
 * tags a page through pkey_mprotect, and the thread's PKRU register, written
 * with wrpkru, decides what the thread may do to it:
 *   - access disabled (AD): a read faults, with SIGSEGV, si_code SEGV_PKUERR
 *     and si_pkey the key, at the page's address;
 *   - enabled: the page reads and writes;
 *   - write disabled (WD): it reads, and a write faults the same way;
 * and pages of other keys are untouched by it, while an ordinary protection
 * fault still reads SEGV_ACCERR.  A fault is caught with sigsetjmp and
 * siglongjmp; the kernel runs the handler with its default PKRU, and the
 * jump does not restore the thread's, so each access writes PKRU again on
 * its way out.
 *
 * Built static, so that scripts/pku-vm can run it in a VM whose emulated CPU
 * has PKU (the development hosts' CPUs do not).  Where pkey_alloc fails
 * (no PKU in the CPU, or the kernel does not use it), every case skips and
 * the program exits 77.  It uses kt.h alone, not karui.
 */
#include "kt.h"

#include <setjmp.h>
#include <sys/mman.h>

#define AD(k) (1u << (2 * (k)))
#define WD(k) (1u << (2 * (k) + 1))

static inline uint32_t rdpkru(void)
{
	uint32_t eax, edx;
	__asm__ volatile("rdpkru" : "=a"(eax), "=d"(edx) : "c"(0));
	return eax;
}

static inline void wrpkru(uint32_t pkru)
{
	__asm__ volatile("wrpkru" : : "a"(pkru), "c"(0), "d"(0) : "memory");
}

/* A fresh key, with access and writes allowed; skips where there are none. */
static int new_key(void)
{
	int k = pkey_alloc(0, 0);
	if (k < 0) {
		if (errno == EINVAL || errno == ENOSPC || errno == ENOSYS)
			KT_SKIP("no protection keys here");
		fprintf(stderr, "  pkey_alloc: %s\n", strerror(errno));
		_exit(1);
	}
	return k;
}

/* A page holding 42, tagged with key k (0: the default key, left alone). */
static volatile int *new_page(int k)
{
	long ps = sysconf(_SC_PAGESIZE);
	void *p = mmap(NULL, ps, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	KT_CHECK(p != MAP_FAILED);
	*(volatile int *)p = 42;
	if (k)
		KT_EQ(pkey_mprotect(p, ps, PROT_READ | PROT_WRITE, k), 0);
	return p;
}

static sigjmp_buf fault_env;
static volatile int fault_code, fault_pkey;
static void *volatile fault_addr;

static void on_segv(int sig, siginfo_t *si, void *uc)
{
	fault_code = si->si_code;
	fault_pkey = (int)si->si_pkey;
	fault_addr = si->si_addr;
	siglongjmp(fault_env, 1);
}

/* Reads (write: writes *v to) *p with PKRU set to pkru for the access, then
 * back to what it was.  1: the access faulted (fault_* tell how), 0: it
 * did not (a read's value in *v). */
static int access_as(volatile int *p, int write, int *v, uint32_t pkru)
{
	struct sigaction sa = {.sa_sigaction = on_segv, .sa_flags = SA_SIGINFO};
	sigemptyset(&sa.sa_mask);
	KT_EQ(sigaction(SIGSEGV, &sa, NULL), 0);
	fault_code = fault_pkey = -1;
	fault_addr = NULL;
	uint32_t before = rdpkru();
	if (sigsetjmp(fault_env, 1)) {
		wrpkru(before);
		return 1;
	}
	wrpkru(pkru);
	if (write)
		*p = *v;
	else
		*v = *p;
	wrpkru(before);
	return 0;
}

static void key_comes_with_access_allowed(void)
{
	int k = new_key();
	KT_CHECK(k >= 1 && k <= 15);
	uint32_t pkru = rdpkru();
	fprintf(stderr, "  key %d, PKRU %#x\n", k, pkru);
	KT_EQ(pkru & (AD(k) | WD(k)), 0);
	KT_EQ(pkru & (AD(0) | WD(0)), 0);
	KT_EQ(pkey_free(k), 0);
}

static void access_disabled_read_faults_with_pkuerr(void)
{
	int k = new_key(), v = 0;
	volatile int *p = new_page(k);
	KT_EQ(access_as(p, 0, &v, rdpkru() | AD(k)), 1);
	KT_EQ(fault_code, SEGV_PKUERR);
	KT_EQ(fault_pkey, k);
	KT_CHECK(fault_addr == (void *)p);
	/* a write faults too, and leaves the page as it was */
	v = 7;
	KT_EQ(access_as(p, 1, &v, rdpkru() | AD(k)), 1);
	KT_EQ(fault_code, SEGV_PKUERR);
	KT_EQ(fault_pkey, k);
	KT_EQ(access_as(p, 0, &v, rdpkru()), 0);
	KT_EQ(v, 42);
}

static void access_enabled_reads_and_writes(void)
{
	int k = new_key(), v = 0;
	volatile int *p = new_page(k);
	uint32_t open = rdpkru() & ~(AD(k) | WD(k));
	KT_EQ(access_as(p, 0, &v, open), 0);
	KT_EQ(v, 42);
	v = 43;
	KT_EQ(access_as(p, 1, &v, open), 0);
	v = 0;
	KT_EQ(access_as(p, 0, &v, open), 0);
	KT_EQ(v, 43);
}

static void write_disabled_reads_but_refuses_writes(void)
{
	int k = new_key(), v = 0;
	volatile int *p = new_page(k);
	uint32_t ro = (rdpkru() & ~AD(k)) | WD(k);
	KT_EQ(access_as(p, 0, &v, ro), 0);
	KT_EQ(v, 42);
	v = 44;
	KT_EQ(access_as(p, 1, &v, ro), 1);
	KT_EQ(fault_code, SEGV_PKUERR);
	KT_EQ(fault_pkey, k);
	KT_CHECK(fault_addr == (void *)p);
	KT_EQ(access_as(p, 0, &v, ro), 0);
	KT_EQ(v, 42);
}

static void other_keys_pages_are_untouched_and_other_faults_are_accerr(void)
{
	int k = new_key(), v = 0;
	volatile int *mine = new_page(k), *other = new_page(0);
	uint32_t shut = rdpkru() | AD(k);
	KT_EQ(access_as(other, 0, &v, shut), 0);
	KT_EQ(v, 42);
	v = 45;
	KT_EQ(access_as(other, 1, &v, shut), 0);
	KT_EQ(access_as(mine, 0, &v, shut), 1);
	KT_EQ(fault_code, SEGV_PKUERR);
	/* a read-only page of key 0, written with every key open */
	KT_EQ(mprotect((void *)other, sysconf(_SC_PAGESIZE), PROT_READ), 0);
	KT_EQ(access_as(other, 1, &v, 0), 1);
	KT_EQ(fault_code, SEGV_ACCERR);
}

int main(int argc, char **argv)
{
	kt_args(argc, argv);
	KT_RUN(key_comes_with_access_allowed);
	KT_RUN(access_disabled_read_faults_with_pkuerr);
	KT_RUN(access_enabled_reads_and_writes);
	KT_RUN(write_disabled_reads_but_refuses_writes);
	KT_RUN(other_keys_pages_are_untouched_and_other_faults_are_accerr);
	return kt_finish();
}
