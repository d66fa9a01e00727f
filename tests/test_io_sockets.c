/* L3 io: sockets (src/io/io.c): a TCP echo server on two VPs, refused
 * connects, accept timeouts, and reads under cancels and deadlines.  Run
 * on both back ends (kt_io.h). */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>

#include "karui.h"
#include "kt.h"
#include "kt_io.h"

#define CONNS 200
#define MSGS 20

static unsigned long mps_live(void)
{
	kr_stats st;
	KT_EQ(kr_stats_get(&st), 0);
	return st.mps_live;
}

static void *echo_conn(void *a)
{
	int fd = (int)(intptr_t)a;
	char buf[512];
	for (;;) {
		size_t n, sent;
		KT_EQ(kr_recv(fd, buf, sizeof buf, 0, &n), 0);
		if (n == 0)
			break;
		KT_EQ(kr_send(fd, buf, n, 0, &sent), 0);
		KT_EQ(sent, n);
	}
	kr_close(fd);
	return NULL;
}

static void *acceptor(void *a)
{
	int ls = (int)(intptr_t)a;
	for (int i = 0; i < CONNS; i++) {
		struct sockaddr_in peer;
		socklen_t l = sizeof peer;
		int fd;
		KT_EQ(kr_accept(ls, (struct sockaddr *)&peer, &l, SOCK_CLOEXEC, &fd), 0);
		KT_CHECK(fd >= 0);
		KT_EQ(peer.sin_family, AF_INET);
		kr_mp *m;
		KT_EQ(kr_mp_create(&m, &(kr_attr){.stack_size = 32768, .flags = KR_MP_DETACHED},
				   echo_conn, (void *)(intptr_t)fd), 0);
	}
	return NULL;
}

static uint16_t port;
static int echoed;

static void *client(void *a)
{
	unsigned id = (unsigned)(uintptr_t)a;
	int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	KT_CHECK(s >= 0);
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	KT_EQ(kr_connect_until(s, (struct sockaddr *)&sa, sizeof sa, in_ms(10000)), 0);
	for (unsigned i = 0; i < MSGS; i++) {
		char msg[64], back[64];
		int n = snprintf(msg, sizeof msg, "client %u message %u", id, i);
		KT_EQ(kr_write_all(s, msg, (size_t)n, NULL), 0);
		int got = 0;
		while (got < n) {
			size_t r;
			KT_EQ(kr_read_until(s, back + got, sizeof back - (size_t)got, &r, in_ms(10000)), 0);
			KT_CHECK(r > 0);
			got += (int)r;
		}
		KT_EQ(got, n);
		KT_CHECK(memcmp(msg, back, (size_t)n) == 0);
	}
	__atomic_fetch_add(&echoed, 1, __ATOMIC_RELAXED);
	kr_close(s);
	return NULL;
}

static void tcp_echo_serves_many_connections_on_two_vps(void)
{
	init(2);
	int ls = listen_any(&port);
	kr_mp *acc, **cl = calloc(CONNS, sizeof *cl);
	KT_EQ(kr_mp_create(&acc, &small, acceptor, (void *)(intptr_t)ls), 0);
	for (unsigned i = 0; i < CONNS; i++)
		KT_EQ(kr_mp_create(&cl[i], &small, client, (void *)(uintptr_t)i), 0);
	for (unsigned i = 0; i < CONNS; i++)
		KT_EQ(kr_mp_join(cl[i], NULL), 0);
	KT_EQ(kr_mp_join(acc, NULL), 0);
	KT_EQ(echoed, CONNS);
	/* detached servers end once their client has closed (the main
	 * microprocess is not counted) */
	KT_WAIT(mps_live() == 0, kr_mp_sleep_for(2 * MS));
	kr_close(ls);
	free(cl);
	KT_EQ(kr_fini(), 0);
}

static void connect_to_a_closed_port_is_refused(void)
{
	init(1);
	uint16_t p;
	int ls = listen_any(&p);
	close(ls); /* nobody listens on p now */
	int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(p),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	KT_EQ(kr_connect_until(s, (struct sockaddr *)&sa, sizeof sa, in_ms(5000)), ECONNREFUSED);
	kr_close(s);
	KT_EQ(kr_fini(), 0);
}

/* Stress: on 2 VPs, readers take a numbered stream from their pipe while
 * a canceller hits them at random and a quarter of their reads have short
 * deadlines.  A read that returns -ECANCELED or -ETIMEDOUT took nothing,
 * so every reader still gets every number, in order. */
enum { SPAIRS = 16, SNUM = 20000 };
struct spair {
	int p[2];
	kr_mp *reader;
	unsigned long cancelled, timedout, bad;
	uint64_t got;
};
static int stress_readers_left;

static void *stress_writer(void *a)
{
	struct spair *s = a;
	for (uint64_t i = 0; i < SNUM; i++) {
		size_t n = 0;
		KT_EQ(kr_write_all(s->p[1], &i, sizeof i, &n), 0);
		KT_EQ(n, sizeof i);
		if (i % 8 == 0)
			kr_mp_yield();
	}
	return NULL;
}

static void *stress_reader(void *a)
{
	struct spair *s = a;
	unsigned seed = (unsigned)s->p[0];
	unsigned char buf[8];
	size_t have = 0;
	while (s->got < SNUM) {
		uint64_t dl = rand_r(&seed) % 4 ? KR_FOREVER
						  : kr_now() + (uint64_t)(rand_r(&seed) % 50) * 1000;
		size_t n = 9;
		int err = kr_read_until(s->p[0], buf + have, sizeof buf - have, &n, dl);
		if (err == ECANCELED || err == ETIMEDOUT) {
			KT_EQ(n, 0);
			err == ECANCELED ? s->cancelled++ : s->timedout++;
			continue;
		}
		KT_EQ(err, 0);
		KT_CHECK(n > 0);
		if ((have += n) < sizeof buf)
			continue;
		uint64_t v;
		memcpy(&v, buf, sizeof v);
		s->bad += v != s->got;
		s->got++;
		have = 0;
	}
	__atomic_fetch_sub(&stress_readers_left, 1, __ATOMIC_RELEASE);
	return NULL;
}

static void *stress_canceller(void *a)
{
	struct spair *sp = a;
	unsigned seed = 7;
	while (__atomic_load_n(&stress_readers_left, __ATOMIC_ACQUIRE)) {
		kr_mp_cancel(sp[rand_r(&seed) % SPAIRS].reader);
		kr_mp_sleep_for(20 * 1000);
	}
	return NULL;
}

static void reads_under_cancels_and_deadlines_lose_nothing(void)
{
	init(2);
	static struct spair sp[SPAIRS];
	kr_mp *wr[SPAIRS], *canceller;
	stress_readers_left = SPAIRS;
	for (int i = 0; i < SPAIRS; i++) {
		sp[i] = (struct spair){0};
		mkpipe(sp[i].p);
		KT_EQ(kr_mp_create(&sp[i].reader, &small, stress_reader, &sp[i]), 0);
		KT_EQ(kr_mp_create(&wr[i], &small, stress_writer, &sp[i]), 0);
	}
	KT_EQ(kr_mp_create(&canceller, &small, stress_canceller, sp), 0);
	KT_EQ(kr_mp_join(canceller, NULL), 0); /* ends when the readers have */
	unsigned long cancelled = 0, timedout = 0, bad = 0, got = 0;
	for (int i = 0; i < SPAIRS; i++) {
		KT_EQ(kr_mp_join(sp[i].reader, NULL), 0);
		KT_EQ(kr_mp_join(wr[i], NULL), 0);
		cancelled += sp[i].cancelled;
		timedout += sp[i].timedout;
		bad += sp[i].bad;
		got += sp[i].got;
		KT_EQ(kr_close(sp[i].p[0]), 0);
		KT_EQ(kr_close(sp[i].p[1]), 0);
	}
	fprintf(stderr, "  %lu numbers, %lu out of order, %lu reads cancelled, %lu timed out\n",
		got, bad, cancelled, timedout);
	KT_EQ(got, (unsigned long)SPAIRS * SNUM);
	KT_EQ(bad, 0);
	KT_CHECK(cancelled > 0);
	KT_CHECK(timedout > 0);
	KT_EQ(kr_fini(), 0);
}

static void accept_times_out_when_nobody_connects(void)
{
	init(1);
	uint16_t p;
	int ls = listen_any(&p);
	int fd;
	KT_EQ(kr_accept_until(ls, NULL, NULL, 0, &fd, in_ms(40)), ETIMEDOUT);
	kr_close(ls);
	KT_EQ(kr_fini(), 0);
}

int main(int argc, char **argv)
{
	io_args(argc, argv);
	KT_RUN(tcp_echo_serves_many_connections_on_two_vps);
	KT_RUN(connect_to_a_closed_port_is_refused);
	KT_RUN(accept_times_out_when_nobody_connects);
	KT_RUN(reads_under_cancels_and_deadlines_lose_nothing);
	return kt_finish();
}
