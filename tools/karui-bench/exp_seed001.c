/*
 * karui-bench: seed 001's IPC experiment (seed001.ipc), synchronous calls
 * from a client to a server in four patterns, as the paper timed them:
 *
 *   NullProc       no argument, no result
 *   ArgNoRtn       an argument; the server answers with a status only
 *   ArgRtn_NoCopy  an argument; the result is a buffer of the argument's
 *                  size that the server prepared when it started
 *   ArgRtn_Copy    an argument; the result is made from it by real work,
 *                  the paper's colour-map lookup: out[i] = map[in[i]] over
 *                  the bytes, with a table of 256 entries
 *
 * with arguments of 2, 4 and 8 KiB (NullProc has none: one row).  A row is
 * µs per call: metric = the pattern, x = the argument's size in KiB (none
 * for NullProc), the median of c->reps timed runs after a warm-up run, as
 * kb_repeat does.
 *
 * The systems are today's Linux peers, each a client (karui-bench) and a
 * server process forked once per system and serving all its rows:
 *
 *   pipe-rpc     two pipes; a message is a header and its bytes, written
 *                with one writev and read as the header, then its bytes
 *   unix-rpc     a SOCK_SEQPACKET socketpair: one sendmsg and one recvmsg
 *                per message, its boundaries kept by the socket
 *   udp-rpc      two UDP sockets on 127.0.0.1: a message is one datagram;
 *                no retransmission (a lost datagram fails the row after 5 s);
 *                the paper's "UDP-Socket", a plain exchange on a socket
 *   sysv-msgq    two SysV message queues, requests and replies; a message
 *                longer than the queue's msgmax (8192 bytes by default, less
 *                than 8 KiB and a header) goes as several, in order; the
 *                queues are removed when the system ends, or fails
 *   sun-rpc-udp  Sun RPC over UDP (libtirpc; seed001_ipc.x, stubs made by
 *                rpcgen): svcudp_bufcreate on a socket bound to loopback
 *                and clntudp_bufcreate to its port, no portmapper; RPC's
 *                own retransmission, a 5 s timeout; the paper's "Sun-RPC"
 *                (rpcgen, udp)
 *
 * The header of pipe-rpc, unix-rpc, udp-rpc and sysv-msgq (struct hdr)
 * names the pattern, the call's number and the length of what follows;
 * the reply repeats the pattern and number and adds the status.  The
 * server's work is the same function for all five (serve).
 *
 * Every call's argument starts with the call's number, so no two calls
 * send the same bytes; every reply's number, length and status are
 * checked; every result's first 8 bytes are compared with what they must
 * be, and the whole result of the first and the last call of every run
 * (the first before the clock starts, the last after it stops):
 * ArgRtn_Copy's is the lookup of that call's argument, recomputed here,
 * ArgRtn_NoCopy's the lookup of the argument without its number.  A wrong
 * answer, an error or a server that is gone fails the system ("failed"
 * with the row and the reason), never gives a figure.
 *
 * Every system runs on one processor (the experiment's affinity, which
 * the servers inherit), as on the seed's machine, but karui-itc-2vp, whose
 * point is two: across two processors a call's time hangs on an idle
 * processor's wake-up and on where the kernel put the two processes.
 * The server dies with karui-bench (PR_SET_PDEATHSIG) and is killed when
 * its system ends.  A server that dies first never leaves the client
 * waiting: pipes and sockets report it (SIGPIPE is ignored during the
 * experiment, so it shows as EPIPE), udp-rpc and Sun RPC time out, and
 * sysv-msgq's SIGCHLD handler removes the queues, which ends msgrcv.
 *
 * Rejected: a SOCK_STREAM socketpair for unix-rpc (the framing of a stream
 * is pipe-rpc's already); raising msgmax (a benchmark leaves its host's
 * settings alone); checking every result whole (comparing 8 KiB costs
 * about what the lookup does, inside the timing); rpcbind (a daemon the
 * host need not run, for a port the client knows).
 *
 * karui's rows.  The table SYS has an entry per system, each with the same
 * open, call and close, run for the same patterns and sizes.  karui's
 * in-process systems, the paper's own, take their place at its top when
 * karui's domain layer has them: EPC (External Procedure Call: the
 * client's thread runs the server's code, no switch) with no, software and
 * hardware protection (EPC-N, EPC-S, EPC-H), and ITC (Inter-Thread
 * Communication: a thread on each side, shared memory) on one VP and on
 * two, under names that start with "karui" so that --only keeps them.  The
 * peers' ratios (kb_row's `karui`, 0 until then) will be to EPC-S's row of
 * the same pattern and size.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ipc.h>
#include <sys/msg.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "karui.h"
#include "karui/domain.h"
#include "exp.h"
#include "seed001_ipc.h" /* rpcgen's, in the build directory */

#define EXP "seed001.ipc"

enum pat { P_NULL, P_NORTN, P_NOCOPY, P_COPY, NPAT };
static const char *const PAT[NPAT] = {"NullProc", "ArgNoRtn", "ArgRtn_NoCopy", "ArgRtn_Copy"};
static const size_t SIZES[] = {2048, 4096, 8192};
#define NSIZES (sizeof SIZES / sizeof SIZES[0])

/* calls timed per run (--n); the first, checked, is made before the clock
 * starts */
enum { CALLS_QUICK = 1000, CALLS_FULL = 5000 };
enum { MAXARG = KBIPC_MAX, TIMEOUT_S = 5 };

/* ---------------- the argument, the colour map and the server's work ---------------- */

static uint8_t MAP[256];     /* the colour map: a permutation of the bytes */
static uint8_t BASE[MAXARG]; /* every argument's bytes, but for its number */

static void data_init(void)
{
	uint32_t x = 0x9e3779b9u;
	for (int i = 0; i < 256; i++)
		MAP[i] = (uint8_t)(i * 167 + 13);
	for (size_t i = 0; i < MAXARG; i++) {
		x ^= x << 13;
		x ^= x >> 17;
		x ^= x << 5;
		BASE[i] = (uint8_t)x;
	}
}

static void lookup(uint8_t *out, const uint8_t *in, size_t n)
{
	for (size_t i = 0; i < n; i++)
		out[i] = MAP[in[i]];
}

/* the call's number, in its argument's first bytes */
static void stamp(uint8_t *arg, uint64_t seq)
{
	memcpy(arg, &seq, sizeof seq);
}

static int stamped(const void *arg, size_t n, uint64_t seq)
{
	return n >= sizeof seq && !memcmp(arg, &seq, sizeof seq);
}

static uint8_t READY[MAXARG]; /* ArgRtn_NoCopy's result: made when the server starts */
static uint8_t OUT[MAXARG];   /* ArgRtn_Copy's */

/* The server's work for one call: its result (NULL: none, or *n bytes)
 * and *status (0: fine). */
static const uint8_t *serve(int pat, uint64_t seq, const uint8_t *arg, size_t *n, int *status)
{
	*status = 0;
	switch (pat) {
	case P_NULL:
		*status = *n != 0;
		break;
	case P_NORTN:
		*status = !stamped(arg, *n, seq);
		*n = 0;
		break;
	case P_NOCOPY:
		return READY;
	case P_COPY:
		lookup(OUT, arg, *n);
		return OUT;
	default:
		*status = 1;
	}
	*n = 0;
	return NULL;
}

/* In a server process, right after fork: die with karui-bench, then make
 * the prepared result. */
static void server_start(pid_t parent)
{
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() != parent)
		_exit(1);
	lookup(READY, BASE, MAXARG);
}

/* ---------------- the systems ---------------- */

typedef struct ipc_call {
	int pat;
	uint64_t seq;       /* also in arg's first bytes */
	const uint8_t *arg; /* size bytes */
	size_t size;        /* 0 for NullProc */
	uint8_t *res;       /* room for MAXARG: the result of the ArgRtn patterns */
} ipc_call;

/* A system: open starts its server and connects to it (0 or an errno
 * code; everything released on failure), call makes one synchronous call
 * and checks the reply's framing and status (0, an errno code, EBADMSG
 * for a wrong reply), close ends the server and releases everything.
 * note: a row's note, or NULL. */
typedef struct ipc_sys {
	const char *name;
	int (*open)(void **st);
	int (*call)(void *st, const ipc_call *c);
	void (*close)(void *st);
	const char *(*note)(void *st, int pat, size_t size, char *buf, size_t n);
	/* the argument's and the result's memory, where the system has its
	 * own (karui's: sections both sides may use), else NULL */
	void (*bufs)(void *st, uint8_t **arg, uint8_t **res);
} ipc_sys;

static void reap(pid_t pid)
{
	kill(pid, SIGKILL);
	while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
		;
}

/* ---------------- byte channels: pipe-rpc, unix-rpc, udp-rpc, sysv-msgq ---------------- */

typedef struct hdr {
	uint16_t pat;
	uint16_t status; /* replies: 0 fine */
	uint32_t len;    /* bytes after the header */
	uint64_t seq;
} hdr;
#define HDR sizeof(hdr)

typedef struct chan chan;
typedef struct chan_kind {
	int (*make)(chan *ch); /* the endpoints, before fork (0 or errno) */
	int (*send)(chan *ch, const hdr *h, const void *p);
	/* 0, EPIPE (the other side is gone), EMSGSIZE (more than cap), EBADMSG,
	 * ETIMEDOUT, or errno */
	int (*recv)(chan *ch, hdr *h, void *buf, size_t cap);
	void (*release)(chan *ch); /* what make made and the side kept */
	int fds;                   /* the endpoints are descriptors */
} chan_kind;

struct chan {
	const chan_kind *k;
	pid_t pid;               /* the server */
	int e[4];                /* the client's in and out, then the server's */
	int side;                /* 0 in the client, 2 in the server */
	size_t piece;            /* sysv-msgq: the longest message text */
	struct sockaddr_in from; /* udp-rpc's server: the client's address */
	struct sigaction old;    /* sysv-msgq: SIGCHLD's action before */
	int handled;             /* sysv-msgq: SIGCHLD is msgq_died's */
};

static _Noreturn void chan_serve(chan *ch)
{
	static uint8_t arg[MAXARG];
	for (;;) {
		hdr h;
		int err = ch->k->recv(ch, &h, arg, sizeof arg);
		if (err)
			_exit(err == EPIPE ? 0 : 1);
		size_t n = h.len;
		int status;
		const uint8_t *res = serve(h.pat, h.seq, arg, &n, &status);
		hdr r = {.pat = h.pat, .status = (uint16_t)status, .len = (uint32_t)n, .seq = h.seq};
		if (ch->k->send(ch, &r, res))
			_exit(1);
	}
}

/* close the descriptors among e[] but the side's (-1 side: all) */
static void fds_keep(chan *ch, int side)
{
	for (int i = 0; i < 4; i++) {
		int fd = ch->e[i];
		if (fd < 0 || (side >= 0 && (fd == ch->e[side] || fd == ch->e[side + 1])))
			continue;
		close(fd);
		for (int j = i; j < 4; j++)
			if (ch->e[j] == fd)
				ch->e[j] = -1;
	}
}

static void fds_release(chan *ch)
{
	fds_keep(ch, -1);
}

static int chan_open(const chan_kind *k, void **st)
{
	chan *ch = calloc(1, sizeof *ch);
	if (!ch)
		return ENOMEM;
	ch->k = k;
	memset(ch->e, -1, sizeof ch->e);
	int err = k->make(ch);
	if (err) {
		k->release(ch);
		free(ch);
		return err;
	}
	pid_t parent = getpid();
	fflush(NULL);
	ch->pid = fork();
	if (ch->pid < 0) {
		err = errno;
		k->release(ch);
		free(ch);
		return err;
	}
	if (ch->pid == 0) {
		server_start(parent);
		ch->side = 2;
		if (k->fds)
			fds_keep(ch, 2);
		chan_serve(ch);
	}
	if (k->fds)
		fds_keep(ch, 0);
	*st = ch;
	return 0;
}

static int chan_call(void *st, const ipc_call *c)
{
	chan *ch = st;
	hdr h = {.pat = (uint16_t)c->pat, .len = (uint32_t)c->size, .seq = c->seq}, r;
	int err = ch->k->send(ch, &h, c->arg);
	if (!err)
		err = ch->k->recv(ch, &r, c->res, MAXARG);
	if (err)
		return err;
	uint32_t want = c->pat >= P_NOCOPY ? (uint32_t)c->size : 0;
	return r.pat != h.pat || r.seq != h.seq || r.len != want || r.status ? EBADMSG : 0;
}

static void chan_close(void *st)
{
	chan *ch = st;
	ch->k->release(ch);
	reap(ch->pid);
	free(ch);
}

/* ---- pipe-rpc ---- */

static int pipe_make(chan *ch)
{
	int c2s[2], s2c[2], err = kb_two_pipes(c2s, s2c);
	if (err)
		return err;
	int e[4] = {s2c[0], c2s[1], c2s[0], s2c[1]};
	memcpy(ch->e, e, sizeof e);
	return 0;
}

static int pipe_send(chan *ch, const hdr *h, const void *p)
{
	struct iovec v[2] = {{(void *)h, HDR}, {(void *)p, h->len}};
	struct iovec *iov = v;
	int cnt = h->len ? 2 : 1;
	while (cnt > 0) {
		ssize_t n = writev(ch->e[ch->side + 1], iov, cnt);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return errno;
		}
		while (cnt > 0 && (size_t)n >= iov->iov_len) {
			n -= (ssize_t)iov->iov_len;
			iov++;
			cnt--;
		}
		if (cnt > 0) {
			iov->iov_base = (char *)iov->iov_base + n;
			iov->iov_len -= (size_t)n;
		}
	}
	return 0;
}

static int read_full(int fd, void *buf, size_t n)
{
	while (n > 0) {
		ssize_t got = read(fd, buf, n);
		if (got == 0)
			return EPIPE;
		if (got < 0) {
			if (errno == EINTR)
				continue;
			return errno;
		}
		buf = (char *)buf + got;
		n -= (size_t)got;
	}
	return 0;
}

static int pipe_recv(chan *ch, hdr *h, void *buf, size_t cap)
{
	int err = read_full(ch->e[ch->side], h, HDR);
	if (err)
		return err;
	return h->len > cap ? EMSGSIZE : read_full(ch->e[ch->side], buf, h->len);
}

static const chan_kind PIPE_RPC = {pipe_make, pipe_send, pipe_recv, fds_release, 1};

/* ---- unix-rpc and udp-rpc: a message is one datagram ---- */

static int unix_make(chan *ch)
{
	int sv[2];
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv))
		return errno;
	int e[4] = {sv[0], sv[0], sv[1], sv[1]};
	memcpy(ch->e, e, sizeof e);
	return 0;
}

static int udp_make(chan *ch)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t alen = sizeof a;
	struct timeval tmo = {TIMEOUT_S, 0};
	int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (s < 0)
		return errno;
	ch->e[2] = ch->e[3] = s;
	int c = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (c < 0)
		return errno;
	ch->e[0] = ch->e[1] = c;
	if (bind(s, (struct sockaddr *)&a, sizeof a) || getsockname(s, (struct sockaddr *)&a, &alen) ||
	    connect(c, (struct sockaddr *)&a, sizeof a) ||
	    setsockopt(c, SOL_SOCKET, SO_RCVTIMEO, &tmo, sizeof tmo))
		return errno;
	return 0;
}

/* udp-rpc's server answers whoever asked; everything else is connected */
static int dgram_named(const chan *ch)
{
	return ch->side == 2 && ch->k->make == udp_make;
}

static int dgram_send(chan *ch, const hdr *h, const void *p)
{
	struct iovec v[2] = {{(void *)h, HDR}, {(void *)p, h->len}};
	struct msghdr m = {.msg_iov = v, .msg_iovlen = h->len ? 2 : 1};
	if (dgram_named(ch)) {
		m.msg_name = &ch->from;
		m.msg_namelen = sizeof ch->from;
	}
	ssize_t n;
	while ((n = sendmsg(ch->e[ch->side + 1], &m, 0)) < 0 && errno == EINTR)
		;
	if (n < 0)
		return errno;
	return (size_t)n == HDR + h->len ? 0 : EMSGSIZE;
}

static int dgram_recv(chan *ch, hdr *h, void *buf, size_t cap)
{
	struct iovec v[2] = {{h, HDR}, {buf, cap}};
	struct msghdr m = {.msg_iov = v, .msg_iovlen = 2};
	if (dgram_named(ch)) {
		m.msg_name = &ch->from;
		m.msg_namelen = sizeof ch->from;
	}
	ssize_t n;
	while ((n = recvmsg(ch->e[ch->side], &m, 0)) < 0 && errno == EINTR)
		;
	if (n < 0)
		return errno == EAGAIN ? ETIMEDOUT : errno;
	if (n == 0)
		return EPIPE;
	if (m.msg_flags & MSG_TRUNC)
		return EMSGSIZE;
	return (size_t)n >= HDR && (size_t)n == HDR + h->len ? 0 : EBADMSG;
}

static const chan_kind UNIX_RPC = {unix_make, dgram_send, dgram_recv, fds_release, 1};
static const chan_kind UDP_RPC = {udp_make, dgram_send, dgram_recv, fds_release, 1};

/* ---- sysv-msgq ---- */

static struct {
	long mtype;
	uint8_t text[HDR + MAXARG];
} qmsg; /* one message's text, as msgsnd and msgrcv lay it out */

/* the queues, for the SIGCHLD handler: a server that dies while the client
 * waits removes them, and the client's msgrcv returns EIDRM, not never */
static volatile sig_atomic_t qids[2] = {-1, -1};

static void msgq_died(int sig)
{
	int saved = errno;
	for (int i = 0; i < 2; i++)
		if (qids[i] >= 0)
			msgctl(qids[i], IPC_RMID, NULL);
	errno = saved;
}

static int msgq_make(chan *ch)
{
	struct msginfo mi;
	struct msqid_ds ds;
	for (int i = 0; i < 2; i++)
		if ((qids[i] = msgget(IPC_PRIVATE, IPC_CREAT | 0600)) < 0)
			return errno;
	if (msgctl(0, IPC_INFO, (struct msqid_ds *)&mi) < 0 || msgctl(qids[0], IPC_STAT, &ds))
		return errno;
	/* a message no longer than msgmax and than what a queue holds */
	ch->piece = HDR + MAXARG;
	if ((size_t)mi.msgmax < ch->piece)
		ch->piece = (size_t)mi.msgmax;
	if (ds.msg_qbytes < ch->piece)
		ch->piece = ds.msg_qbytes;
	if (ch->piece < HDR)
		return EMSGSIZE;
	int e[4] = {qids[1], qids[0], qids[0], qids[1]}; /* requests on 0, replies on 1 */
	memcpy(ch->e, e, sizeof e);
	struct sigaction sa = {.sa_handler = msgq_died}; /* no SA_RESTART */
	sigemptyset(&sa.sa_mask);
	if (sigaction(SIGCHLD, &sa, &ch->old))
		return errno;
	ch->handled = 1;
	return 0;
}

/* a message's pieces: of h and p as one run of bytes */
static int msgq_send(chan *ch, const hdr *h, const void *p)
{
	size_t total = HDR + h->len;
	for (size_t done = 0; done < total;) {
		size_t n = total - done < ch->piece ? total - done : ch->piece, k = 0;
		if (done < HDR) {
			k = n < HDR - done ? n : HDR - done;
			memcpy(qmsg.text, (const uint8_t *)h + done, k);
		}
		if (n > k)
			memcpy(qmsg.text + k, (const uint8_t *)p + (done + k - HDR), n - k);
		qmsg.mtype = 1;
		while (msgsnd(ch->e[ch->side + 1], &qmsg, n, 0)) {
			if (errno == EIDRM || errno == EINVAL)
				return EPIPE;
			if (errno != EINTR)
				return errno;
		}
		done += n;
	}
	return 0;
}

static int msgq_recv(chan *ch, hdr *h, void *buf, size_t cap)
{
	size_t total = HDR;
	for (size_t done = 0; done < total;) {
		ssize_t got = msgrcv(ch->e[ch->side], &qmsg, ch->piece, 0, 0);
		if (got < 0) {
			if (errno == EIDRM || errno == EINVAL)
				return EPIPE;
			if (errno == EINTR)
				continue;
			return errno;
		}
		size_t n = (size_t)got, k = 0;
		if (done < HDR) {
			k = n < HDR - done ? n : HDR - done;
			memcpy((uint8_t *)h + done, qmsg.text, k);
			if (done + k == HDR) {
				if (h->len > cap)
					return EMSGSIZE;
				total += h->len;
			}
		}
		if (done + n > total)
			return EBADMSG;
		if (n > k)
			memcpy((uint8_t *)buf + (done + k - HDR), qmsg.text + k, n - k);
		done += n;
	}
	return 0;
}

static void msgq_release(chan *ch)
{
	for (int i = 0; i < 2; i++) {
		int q = qids[i];
		qids[i] = -1;
		if (q >= 0)
			msgctl(q, IPC_RMID, NULL);
	}
	if (ch->handled)
		sigaction(SIGCHLD, &ch->old, NULL);
}

static const chan_kind SYSV_MSGQ = {msgq_make, msgq_send, msgq_recv, msgq_release};

static size_t pieces(const chan *ch, size_t len)
{
	return (HDR + len + ch->piece - 1) / ch->piece;
}

static const char *msgq_note(void *st, int pat, size_t size, char *buf, size_t n)
{
	chan *ch = st;
	size_t q = pieces(ch, pat == P_NULL ? 0 : size), r = pieces(ch, pat >= P_NOCOPY ? size : 0);
	if (q == 1 && r == 1)
		return NULL;
	snprintf(buf, n, "%zu messages per request, %zu per reply: at most %zu bytes each", q, r,
		 ch->piece);
	return buf;
}

static int pipe_open(void **st) { return chan_open(&PIPE_RPC, st); }
static int unix_open(void **st) { return chan_open(&UNIX_RPC, st); }
static int udp_open(void **st) { return chan_open(&UDP_RPC, st); }
static int msgq_open(void **st) { return chan_open(&SYSV_MSGQ, st); }

/* ---------------- sun-rpc-udp ---------------- */

enum { SRPC_BUF = 2 * KBIPC_MAX }; /* UDP buffers of client and server: 8 KiB and RPC's headers */

typedef struct srpc {
	pid_t pid;
	CLIENT *cl;
} srpc;

bool_t kbipc_nullproc_1_svc(void *arg, void *res, struct svc_req *rq)
{
	return TRUE;
}

bool_t kbipc_argnortn_1_svc(kbipc_arg *a, int *status, struct svc_req *rq)
{
	size_t n = a->data.kbipc_bytes_len;
	serve(P_NORTN, a->seq, (const uint8_t *)a->data.kbipc_bytes_val, &n, status);
	return TRUE;
}

static bool_t srpc_rtn(int pat, kbipc_arg *a, kbipc_bytes *res)
{
	size_t n = a->data.kbipc_bytes_len;
	int status;
	res->kbipc_bytes_val =
		(char *)serve(pat, a->seq, (const uint8_t *)a->data.kbipc_bytes_val, &n, &status);
	res->kbipc_bytes_len = (u_int)n;
	return TRUE;
}

bool_t kbipc_argrtn_nocopy_1_svc(kbipc_arg *a, kbipc_bytes *res, struct svc_req *rq)
{
	return srpc_rtn(P_NOCOPY, a, res);
}

bool_t kbipc_argrtn_copy_1_svc(kbipc_arg *a, kbipc_bytes *res, struct svc_req *rq)
{
	return srpc_rtn(P_COPY, a, res);
}

/* the results are the server's own buffers (READY, OUT): nothing to free */
int kbipc_prog_1_freeresult(SVCXPRT *t, xdrproc_t x, caddr_t res)
{
	return 1;
}

void kbipc_prog_1(struct svc_req *rq, SVCXPRT *t); /* rpcgen's dispatch */

static _Noreturn void srpc_serve(int sock)
{
	SVCXPRT *t = svcudp_bufcreate(sock, SRPC_BUF, SRPC_BUF);
	/* protocol 0: registered with the dispatcher, not with a portmapper */
	if (t && svc_register(t, KBIPC_PROG, KBIPC_VERS, kbipc_prog_1, 0))
		svc_run();
	_exit(1);
}

static void srpc_close(void *st)
{
	srpc *s = st;
	if (s->cl)
		clnt_destroy(s->cl);
	if (s->pid > 0)
		reap(s->pid);
	free(s);
}

/* The client, on a socket of its own bound to loopback (else libtirpc
 * binds one to every address); the port is given: no portmapper. */
static int srpc_client(srpc *s, struct sockaddr_in *server)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	int sock = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (sock < 0 || bind(sock, (struct sockaddr *)&a, sizeof a)) {
		int err = errno;
		if (sock >= 0)
			close(sock);
		return err;
	}
	/* wait: RPC's retransmission; the client owns sock from here on */
	s->cl = clntudp_bufcreate(server, KBIPC_PROG, KBIPC_VERS, (struct timeval){1, 0}, &sock,
				  SRPC_BUF, SRPC_BUF);
	if (!s->cl) {
		close(sock);
		return ECONNREFUSED;
	}
	clnt_control(s->cl, CLSET_FD_CLOSE, NULL);
	struct timeval total = {TIMEOUT_S, 0};
	return clnt_control(s->cl, CLSET_TIMEOUT, (char *)&total) ? 0 : EINVAL;
}

static int srpc_open(void **st)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t alen = sizeof a;
	srpc *s = calloc(1, sizeof *s);
	if (!s)
		return ENOMEM;
	int sock = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0), err = 0;
	if (sock < 0 || bind(sock, (struct sockaddr *)&a, sizeof a) ||
	    getsockname(sock, (struct sockaddr *)&a, &alen)) {
		err = errno;
		if (sock >= 0)
			close(sock);
		free(s);
		return err;
	}
	pid_t parent = getpid();
	fflush(NULL);
	s->pid = fork();
	if (s->pid == 0) {
		server_start(parent);
		srpc_serve(sock);
	}
	err = s->pid < 0 ? errno : 0;
	close(sock);
	if (!err)
		err = srpc_client(s, &a);
	if (err) {
		srpc_close(s);
		return err;
	}
	*st = s;
	return 0;
}

static int srpc_call(void *st, const ipc_call *c)
{
	srpc *s = st;
	kbipc_arg a = {.seq = c->seq, .data = {(u_int)c->size, (char *)c->arg}};
	/* the result is decoded into c->res (xdr_bytes fills a buffer it is given) */
	kbipc_bytes res = {0, (char *)c->res};
	int status = 0;
	enum clnt_stat e;
	switch (c->pat) {
	case P_NULL:
		e = kbipc_nullproc_1(NULL, NULL, s->cl);
		break;
	case P_NORTN:
		e = kbipc_argnortn_1(&a, &status, s->cl);
		break;
	case P_NOCOPY:
		e = kbipc_argrtn_nocopy_1(&a, &res, s->cl);
		break;
	default:
		e = kbipc_argrtn_copy_1(&a, &res, s->cl);
	}
	if (e != RPC_SUCCESS) /* RPC_CANTRECV: on loopback, no server at the port */
		return e == RPC_TIMEDOUT ? ETIMEDOUT : e == RPC_CANTRECV ? ECONNREFUSED : EPROTO;
	if (c->pat >= P_NOCOPY && (res.kbipc_bytes_len != c->size || res.kbipc_bytes_val != (char *)c->res))
		return EBADMSG;
	return status ? EBADMSG : 0;
}

/* ---------------- karui's systems: EPC and ITC ---------------- */

/* The procedures of the server's domain, one per pattern.  The argument
 * section holds the argument's bytes and, at MAXARG, its size; the result
 * section the result (ArgRtn_NoCopy's, prepared when the server starts). */
static int kp_null(void *arg, void *res)
{
	(void)arg;
	(void)res;
	return 0;
}

static int kp_nortn(void *arg, void *res)
{
	(void)res;
	const uint8_t *a = arg;
	size_t n;
	memcpy(&n, a + MAXARG, sizeof n);
	return n < sizeof(uint64_t); /* the argument is there, with its number */
}

static int kp_nocopy(void *arg, void *res)
{
	(void)arg;
	(void)res; /* prepared: it is in the result section already */
	return 0;
}

static int kp_copy(void *arg, void *res)
{
	const uint8_t *a = arg;
	size_t n;
	memcpy(&n, a + MAXARG, sizeof n);
	lookup(res, a, n);
	return 0;
}

static kr_epc_proc const KPROC[NPAT] = {kp_null, kp_nortn, kp_nocopy, kp_copy};

typedef struct kipc {
	kr_domain *d, *d2; /* d2: karui-epc-s-switch's second domain */
	kr_section *own, *own2; /* their private sections */
	unsigned calls;
	unsigned proc[NPAT];
	kr_section *arg, *res;
	kr_port *port;   /* ITC */
	kr_mp *server;
} kipc;

static void *kipc_serve(void *p) { return (void *)(intptr_t)kr_port_serve(p); }

static void kipc_close(void *st)
{
	kipc *k = st;
	if (k->port) {
		kr_port_shut(k->port);
		kr_mp_join(k->server, NULL);
		kr_port_destroy(k->port);
	}
	if (k->arg)
		kr_section_destroy(k->arg);
	if (k->res)
		kr_section_destroy(k->res);
	if (k->own)
		kr_section_destroy(k->own);
	if (k->own2)
		kr_section_destroy(k->own2);
	if (k->d)
		kr_domain_destroy(k->d);
	if (k->d2)
		kr_domain_destroy(k->d2);
	kr_fini();
	free(k);
}

/* karui on `vps` VPs, a domain in protection mode `mode` with the four
 * procedures, the two sections, and for ITC a port and its server. */
static int kipc_open(void **st, int mode, unsigned vps, int itc, int two)
{
	kr_config cfg = {.vps = vps};
	int err = kr_epc_mode_set(mode);
	if (err)
		return err;
	if ((err = kr_init(&cfg)))
		return err;
	kipc *k = calloc(1, sizeof *k);
	if (!k) {
		kr_fini();
		return ENOMEM;
	}
	err = kr_domain_create(&k->d, "seed001");
	for (int p = 0; p < NPAT && !err; p++)
		err = kr_domain_export(k->d, KPROC[p], &k->proc[p]);
	if (!err && two) {
		err = kr_domain_create(&k->d2, "seed001-2");
		for (int p = 0; p < NPAT && !err; p++)
			err = kr_domain_export(k->d2, KPROC[p], &k->proc[p]);
		if (!err)
			err = kr_section_create(&k->own, k->d, 4096);
		if (!err)
			err = kr_section_create(&k->own2, k->d2, 4096);
	}
	if (!err)
		err = kr_section_create(&k->arg, NULL, MAXARG + sizeof(size_t));
	if (!err)
		err = kr_section_create(&k->res, NULL, MAXARG);
	if (!err)
		err = kr_section_allow(k->arg, k->d, KR_SECTION_READ);
	if (!err)
		err = kr_section_allow(k->res, k->d, KR_SECTION_WRITE);
	if (!err && two)
		err = kr_section_allow(k->arg, k->d2, KR_SECTION_READ);
	if (!err && two)
		err = kr_section_allow(k->res, k->d2, KR_SECTION_WRITE);
	if (!err)
		lookup(kr_section_addr(k->res), BASE, MAXARG); /* ArgRtn_NoCopy's */
	if (!err && itc) {
		err = kr_port_create(&k->port, k->d);
		if (!err && (err = kr_mp_create(&k->server, NULL, kipc_serve, k->port))) {
			kr_port_destroy(k->port);
			k->port = NULL;
		}
	}
	if (err) {
		kipc_close(k);
		return err;
	}
	*st = k;
	return 0;
}

static int epc_n_open(void **st) { return kipc_open(st, KR_EPC_N, 1, 0, 0); }
static int epc_s_open(void **st) { return kipc_open(st, KR_EPC_S, 1, 0, 0); }
static int epc_s_switch_open(void **st) { return kipc_open(st, KR_EPC_S, 1, 0, 1); }
static int epc_h_open(void **st) { return kipc_open(st, KR_EPC_H, 1, 0, 0); }
static int itc_1vp_open(void **st) { return kipc_open(st, KR_EPC_S, 1, 1, 0); }
static int itc_2vp_open(void **st) { return kipc_open(st, KR_EPC_S, 2, 1, 0); }

static void kipc_bufs(void *st, uint8_t **arg, uint8_t **res)
{
	kipc *k = st;
	*arg = kr_section_addr(k->arg);
	*res = kr_section_addr(k->res);
}

static int kipc_call(void *st, const ipc_call *c)
{
	kipc *k = st;
	memcpy((uint8_t *)kr_section_addr(k->arg) + MAXARG, &c->size, sizeof c->size);
	int status = 0, err;
	if (k->port)
		err = kr_port_call(k->port, k->proc[c->pat], kr_section_addr(k->arg),
				   kr_section_addr(k->res), &status);
	else /* karui-epc-s-switch: the two domains in turn */
		err = kr_epc_call(k->d2 && (++k->calls & 1) ? k->d2 : k->d, k->proc[c->pat],
				  kr_section_addr(k->arg), kr_section_addr(k->res), &status);
	return err ? err : status ? EBADMSG : 0;
}

/* ---------------- the experiment ---------------- */

#define BASE_SYS "karui-epc-s" /* the ratios' base: the seed's EPC-S */

static const ipc_sys SYS[] = {
	{BASE_SYS, epc_s_open, kipc_call, kipc_close, NULL, kipc_bufs},
	{"karui-epc-n", epc_n_open, kipc_call, kipc_close, NULL, kipc_bufs},
	{"karui-epc-s-switch", epc_s_switch_open, kipc_call, kipc_close, NULL, kipc_bufs},
	{"karui-epc-h", epc_h_open, kipc_call, kipc_close, NULL, kipc_bufs},
	{"karui-itc-1vp", itc_1vp_open, kipc_call, kipc_close, NULL, kipc_bufs},
	{"karui-itc-2vp", itc_2vp_open, kipc_call, kipc_close, NULL, kipc_bufs},
	{"pipe-rpc", pipe_open, chan_call, chan_close},
	{"unix-rpc", unix_open, chan_call, chan_close},
	{"udp-rpc", udp_open, chan_call, chan_close},
	{"sysv-msgq", msgq_open, chan_call, chan_close, msgq_note},
	{"sun-rpc-udp", srpc_open, srpc_call, srpc_close},
};
#define NSYS (sizeof SYS / sizeof SYS[0])

/* Are the first n bytes of a call's result what they must be?  (ArgRtn
 * patterns; the others have none, and call checks their status) */
static int result_ok(const ipc_call *c, size_t n)
{
	static uint8_t want[MAXARG];
	if (c->pat < P_NOCOPY)
		return 1;
	lookup(want, c->pat == P_COPY ? c->arg : BASE, n);
	return !memcmp(want, c->res, n);
}

/* One call, the next number, its result checked over `check` bytes; 0, an
 * errno code, or -1 (a wrong result) */
static int one_call(const ipc_sys *s, void *st, ipc_call *c, uint8_t *arg, size_t check)
{
	static uint64_t seq;
	c->seq = ++seq;
	stamp(arg, c->seq);
	int err = s->call(st, c);
	return err ? err : !result_ok(c, check) ? -1 : 0;
}

/* A warm-up run and c->reps timed runs of `calls` calls: v[] gets µs per
 * call.  0, an errno code or -1 (a wrong result). */
static int ipc_runs(const kb_ctx *c, const ipc_sys *s, void *st, int pat, size_t size,
		    long calls, double *v)
{
	static uint8_t args[MAXARG], ress[MAXARG];
	uint8_t *arg = args, *res = ress;
	if (s->bufs)
		s->bufs(st, &arg, &res);
	memcpy(arg, BASE, size);
	ipc_call k = {.pat = pat, .arg = arg, .size = pat == P_NULL ? 0 : size, .res = res};
	for (int r = -1; r < c->reps; r++) {
		/* the first call, checked whole, untimed; then the timed ones,
		 * each result's first bytes checked (the lookup of the call's
		 * number, for ArgRtn_Copy), and the last one's whole */
		int err = one_call(s, st, &k, arg, k.size);
		double t0 = kb_now_ns();
		for (long i = 0; i < calls && !err; i++)
			err = one_call(s, st, &k, arg, sizeof k.seq);
		double t1 = kb_now_ns();
		if (!err && !result_ok(&k, k.size))
			err = -1;
		if (err)
			return err;
		if (r >= 0)
			v[r] = (t1 - t0) / 1e3 / (double)calls;
	}
	return 0;
}

/* EPC-S's medians, each peer's ratio base, by pattern and size */
static double base_us[NPAT][NSIZES];

/* one system's rows; 0, or why it failed in why[] */
static int ipc_system(const kb_ctx *c, const ipc_sys *s, long calls, char *why, size_t nwhy)
{
	void *st;
	int err = s->open(&st);
	if (err) {
		snprintf(why, nwhy, "starting its server: %s", strerror(err));
		return err;
	}
	for (int pat = 0; pat < NPAT && !err; pat++)
		for (size_t i = 0; i < (pat == P_NULL ? 1 : NSIZES) && !err; i++) {
			double v[16];
			char nb[128];
			if ((err = ipc_runs(c, s, st, pat, SIZES[i], calls, v))) {
				snprintf(why, nwhy, "%s %zu KiB: %s", PAT[pat], SIZES[i] / 1024,
					 err < 0 ? "a wrong result" : strerror(err));
				break;
			}
			const char *note = s->note ? s->note(st, pat, SIZES[i], nb, sizeof nb) : NULL;
			int base = !strcmp(s->name, BASE_SYS);
			double m = kb_row_note(c, EXP, s->name, PAT[pat], "us", v, c->reps,
					       base ? 0 : base_us[pat][i],
					       pat == P_NULL ? -1 : (double)(SIZES[i] / 1024), note);
			if (base)
				base_us[pat][i] = m;
		}
	s->close(st);
	return err;
}

void kb_seed001_ipc(const kb_ctx *c)
{
	long calls = c->n > 0 ? c->n : c->quick ? CALLS_QUICK : CALLS_FULL;
	struct sigaction ign = {.sa_handler = SIG_IGN}, old;
	sigemptyset(&ign.sa_mask);
	sigaction(SIGPIPE, &ign, &old);
	data_init();
	/* one processor for every system, as on the seed's machine: a peer's
	 * client and server (which inherits the mask) then hand the CPU over
	 * at each call, as karui's systems on one VP do; on two, a call's
	 * time would hang on an idle processor's wake-up (12 to 50 us on a
	 * VM) and on where the kernel put the two */
	int pinned = kb_pin(1);
	for (size_t i = 0; i < NSYS; i++) {
		if (pinned && !strcmp(SYS[i].name, "karui-itc-2vp"))
			kb_pin(0); /* its two VPs */
		char why[200];
		int err = kb_want(c, EXP, SYS[i].name) ? ipc_system(c, &SYS[i], calls, why, sizeof why)
						       : 0;
		if (err == ENOTSUP) /* EPC-H without protection keys */
			kb_row_none(EXP, SYS[i].name, "skipped", "no protection keys on this CPU");
		else if (err)
			kb_row_none(EXP, SYS[i].name, "failed", why);
		if (pinned && !strcmp(SYS[i].name, "karui-itc-2vp"))
			kb_pin(1);
	}
	kb_pin(0);
	sigaction(SIGPIPE, &old, NULL);
}

/*
 * seed001.count: the instructions of one EPC call in each mode, NullProc
 * and ArgRtn_Copy at 8 KiB, counted exactly by karui-epc-count
 * (epc_count.c: single steps under ptrace).  EPC-H where the CPU has no
 * protection keys is counted in the VM of scripts/pku-vm, whose emulated
 * CPU has them (a count is the same on any CPU; an emulator's time is
 * nobody's), with the VM's EPC-N beside it for the difference; "skipped"
 * where neither can run.
 */
#define COUNT_EXP "seed001.count"

/* Rows from karui-epc-count's output; `from`: the VM's (a note), which
 * gives its karui-epc-h and, as "karui-epc-n-vm", its karui-epc-n.
 * Returns the systems seen skipped (a bit per mode: 1 n, 2 s, 4 h), or
 * -1 when the output had no row. */
static int count_rows(const kb_ctx *c, FILE *p, int vm)
{
	char line[256], sys[64], pat[32];
	long n;
	int skipped = 0, rows = 0;
	while (fgets(line, sizeof line, p)) {
		int f = sscanf(line, "%63s %31s %ld", sys, pat, &n);
		int bit = !strcmp(sys, "karui-epc-n") ? 1 : !strcmp(sys, "karui-epc-s") ? 2
						       : !strcmp(sys, "karui-epc-h") ? 4 : 0;
		if (f == 2 && !strcmp(pat, "skipped")) {
			skipped |= bit;
			rows++;
		} else if (f == 3 && bit) {
			rows++;
			if (vm && bit == 2)
				continue;
			double v = (double)n;
			char name[80];
			snprintf(name, sizeof name, "%s%s", sys, vm && bit == 1 ? "-vm" : "");
			kb_row_note(c, COUNT_EXP, name, pat, "instr", &v, 1, 0,
				    strcmp(pat, "NullProc") ? 8 : -1,
				    vm ? "counted in a VM (QEMU TCG, -cpu max)" : NULL);
		}
	}
	return rows ? skipped : -1;
}

void kb_seed001_count(const kb_ctx *c)
{
	char cmd[2 * PATH_MAX + 128];
	snprintf(cmd, sizeof cmd, "%s/karui-epc-count", c->dir);
	if (access(cmd, X_OK)) {
		kb_row_none(COUNT_EXP, "karui-epc-n", "skipped",
			    "no karui-epc-count (a static link was not possible in this build)");
		return;
	}
	fprintf(stderr, "%s: karui-epc-count, here\n", COUNT_EXP);
	FILE *p = popen(cmd, "r");
	int skipped = p ? count_rows(c, p, 0) : -1;
	if (!p || pclose(p) || skipped < 0) {
		kb_row_none(COUNT_EXP, "karui-epc-n", "failed", "karui-epc-count failed");
		return;
	}
	if (!(skipped & 4))
		return;
	fprintf(stderr, "%s: karui-epc-count, in a VM whose CPU has protection keys\n",
		COUNT_EXP);
	snprintf(cmd, sizeof cmd, "%sscripts/pku-vm --timeout 600 -- %s/karui-epc-count 2>/dev/null",
		 KB_SOURCE_DIR, c->dir);
	p = popen(cmd, "r");
	int vm = p ? count_rows(c, p, 1) : -1;
	int st = p ? pclose(p) : -1;
	if (vm < 0 || (vm & 4))
		kb_row_none(COUNT_EXP, "karui-epc-h", "skipped",
			    st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 77
				    ? "no protection keys on this CPU, and no VM to count in"
				    : "no protection keys on this CPU, and the VM's count failed");
}
