/* Helpers shared by the I/O tests (tests/test_io_*.c): each includes this
 * after kt.h, and its main starts with io_args.
 *
 * ctest runs every I/O test file three times: as it is (io_uring where the
 * kernel allows); with KARUI_IO=epoll, which forces the fallback back end;
 * and with KARUI_TEST_DENY_URING=1, under a seccomp filter that refuses
 * io_uring_setup with EPERM (as container runtimes do), where karui must
 * fall back to epoll by itself.  Some cases run a fourth time under
 * valgrind (KARUI_TEST_VALGRIND=1), where karui must take epoll by itself
 * too. */
#ifndef KARUI_KT_IO_H
#define KARUI_KT_IO_H

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "kt_karui.h"
#include "kt_seccomp.h"

static const kr_attr small = {.stack_size = 32768};

static inline uint64_t in_ms(uint64_t ms) { return kr_now() + ms * MS; }

static inline void mkpipe(int p[2]) { KT_EQ(pipe2(p, O_CLOEXEC), 0); }

enum { NR_IO_URING_SETUP = 425 }; /* the same on x86-64 and aarch64 */

/* KARUI_TEST_DENY_URING: io_uring_setup fails with EPERM for this process
 * and every test it forks.  0, or why the filter could not be installed. */
static inline int deny_io_uring(void) { return kt_seccomp_deny(NR_IO_URING_SETUP, -1, 0, EPERM); }

/* Run fn in a microprocess on VP `id` (0 or 1, of 2).  Two microprocesses
 * spin without a scheduling point until both run, so that they are on
 * both VPs; the one on the other VP goes on spinning, holding it, until
 * the one on VP `id` has run fn.  The caller waits in kr_mp_join
 * meanwhile. */
static void (*vp1_fn)(void);
static unsigned vp1_id;
static int vp1_arrived, vp1_done;

static inline void *vp1_pair(void *a)
{
	__atomic_fetch_add(&vp1_arrived, 1, __ATOMIC_SEQ_CST);
	while (__atomic_load_n(&vp1_arrived, __ATOMIC_SEQ_CST) < 2)
		;
	if (kr_vp_id(kr_vp_self()) == vp1_id) {
		vp1_fn();
		KT_EQ(kr_vp_id(kr_vp_self()), vp1_id); /* the other VP is still held */
		__atomic_store_n(&vp1_done, 1, __ATOMIC_RELEASE);
	} else {
		while (!__atomic_load_n(&vp1_done, __ATOMIC_ACQUIRE))
			;
	}
	return a;
}

static inline void on_vp(unsigned id, void (*fn)(void))
{
	kr_mp *m[2];
	vp1_fn = fn;
	vp1_id = id;
	vp1_arrived = vp1_done = 0;
	for (int i = 0; i < 2; i++)
		KT_EQ(kr_mp_create(&m[i], &small, vp1_pair, NULL), 0);
	for (int i = 0; i < 2; i++)
		KT_EQ(kr_mp_join(m[i], NULL), 0);
	KT_EQ(vp1_done, 1);
}

static inline int listen_any(uint16_t *port)
{
	int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	KT_CHECK(s >= 0);
	int one = 1;
	setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	KT_EQ(bind(s, (struct sockaddr *)&a, sizeof a), 0);
	KT_EQ(listen(s, 1024), 0);
	socklen_t l = sizeof a;
	KT_EQ(getsockname(s, (struct sockaddr *)&a, &l), 0);
	*port = ntohs(a.sin_port);
	return s;
}

/* kt_args, then for KARUI_TEST_DENY_URING the filter (or the whole file
 * skipped where it cannot be installed). */
static inline void io_args(int argc, char **argv)
{
	kt_args(argc, argv);
	if (getenv("KARUI_TEST_DENY_URING")) {
		int err = deny_io_uring();
		if (err) {
			fprintf(stderr, "  skipped: no seccomp filter here: %s\n", strerror(err));
			exit(KT_SKIP_CODE);
		}
	}
}

#endif
