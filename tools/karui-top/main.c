/*
 * karui-top — a view of the C-area (seed 004): the user's karui processes
 * that share the processors through it, their VPs and what the allocator
 * gives each.  How to read every column: docs/karui-top.md.
 *
 *   karui-top [-d SECONDS] [--segment NAME]           full screen, live
 *   karui-top --once [-d SECONDS] [--segment NAME]    one snapshot, text
 *
 * Reading.  karui-top only reads: the segment is opened O_RDONLY and
 * mapped PROT_READ, so nothing it does can disturb the allocator.  Each
 * sample attaches afresh (open, check, copy, unmap): a segment unlinked
 * and made again by a new first participant is the one read next, and
 * between samples karui-top holds nothing of it.  No lock is taken (the
 * allocator's mutex is not a reader's to take, and a read-only mapping
 * could not take it): each word is read with a relaxed atomic load, and
 * a slot is kept only when its state, pid and start time read the same
 * before and after its copy, so a slot freed and claimed again meanwhile
 * is left out of that sample rather than shown half old, half new.  Its
 * numbers can still be a few updates apart from each other: they are for
 * display, as the layout says.
 *
 * Nothing in the segment is trusted (layout.h).  The header must hold the
 * magic, this version and this size, and the object must be that large.
 * A slot is shown only when LIVE, with a pid > 0 and a NUL-terminated
 * comm; its bytes that are not printable ASCII are shown as '?', which
 * keeps escape sequences off the terminal.  At most KR_CAREA_VPS VPs are
 * shown, whatever nvp says; a status out of range reads '?'.  A slot
 * whose pid is gone (kill: ESRCH), or that now belongs to a process of
 * another start time (/proc/PID/stat field 22), is shown "dead", without
 * VPs.  A segment truncated by its owner while being copied raises
 * SIGBUS: the copy is abandoned (sigsetjmp) and the sample is an error.
 *
 * Rates are differences of two samples' counters over the CLOCK_MONOTONIC
 * time between them, per VP slot while its tid stays the same (a new
 * thread, or a counter that went back, gives no rate: "-"); a process's
 * rate is the sum of its VPs' rates.  --once samples twice, -d SECONDS
 * apart (0.2 s unless told; -d 0: one sample, every rate "-").
 *
 * The terminal.  Live mode needs no terminal library (tools add no
 * dependency to karui's libc and liburing): ANSI escapes on the alternate
 * screen with the cursor hidden, the terminal in non-canonical mode
 * without echo; ISIG stays on, so Ctrl-C is a SIGINT.  The signals that
 * matter (INT, TERM, HUP, QUIT, WINCH, TSTP) are blocked but inside
 * ppoll, which waits for a key with the time left to the next refresh as
 * its timeout: no signal is lost between a check and the wait, and an
 * idle karui-top sleeps in the kernel.  A key or a resize redraws the
 * last sample without taking another, so the refresh keeps its pace.  On
 * q the terminal is restored and karui-top exits 0; on INT, TERM, HUP or
 * QUIT it is restored and the signal is raised again, so the parent sees
 * how it ended; on TSTP it is restored, the process stops, and on its
 * continuation the view comes back.  Each frame is one write: a line is
 * cleared, then written cut to the window's width; lines past its height
 * are not drawn, and no newline follows the last, so the screen never
 * scrolls.
 *
 * Rejected: ncurses (a dependency); a thread or a timer signal for the
 * refresh (the wait's timeout is the refresh); mapping the segment once
 * for the whole run (it would keep showing a segment that was unlinked).
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "layout.h"

/* One word of the segment, read as the layout asks: atomically. */
#define LD(x) __atomic_load_n(&(x), __ATOMIC_RELAXED)

enum { SWITCHES, SUSPENSIONS, RECOVERIES, PREEMPTIONS, NCOUNT };
static const char *const count_name[NCOUNT] = {"switches", "suspensions", "recoveries",
					      "preemptions"};

static const char *const status_name[KR_CA_NSTATUS] = {
	"free", "running", "idle", "blocked", "suspended", "recovering", "recovered"};

#define NO_RATE (-1.0) /* a rate that could not be computed: "-" */

struct vp_copy {
	uint32_t status;
	int32_t tid;
	uint64_t count[NCOUNT];
	double rate[NCOUNT];
};

struct proc_copy {
	unsigned slot;
	int32_t pid;
	uint64_t start;
	int dead;
	uint32_t nvp, parallelism, want, grant, running;
	char comm[sizeof ((struct kr_carea_proc *)0)->comm];
	unsigned nshown; /* VPs copied: nvp, at most KR_CAREA_VPS; 0 when dead */
	struct vp_copy vp[KR_CAREA_VPS];
	double rate[NCOUNT];
};

struct sample {
	int ok;            /* 0: why says what is wrong with the segment */
	char why[320];
	uint64_t t;        /* CLOCK_MONOTONIC ns when it was taken */
	uint32_t ncpu;
	uint64_t epoch;
	double epoch_rate;
	uint64_t grants;   /* the shown processes' grants, summed */
	unsigned nproc;
	struct proc_copy proc[KR_CAREA_PROCS];
};

static uint64_t now_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

/* ---------------- reading the segment ---------------- */

/* s with every byte that is not printable ASCII (or is a space) as '?',
 * "-" when empty: a word that cannot break a line or the terminal. */
static void printable(char *s)
{
	for (char *c = s; *c; c++)
		if (*c < '!' || *c > '~')
			*c = '?';
	if (!*s)
		strcpy(s, "-");
}

/* The start time of process pid (/proc/PID/stat field 22); -1 if unread. */
static int proc_start(int32_t pid, uint64_t *start)
{
	char path[40], buf[1024];
	snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ssize_t n = read(fd, buf, sizeof buf - 1);
	close(fd);
	if (n <= 0)
		return -1;
	buf[n] = 0;
	char *p = strrchr(buf, ')'); /* the name may hold anything */
	for (int field = 2; p && field < 22; field++)
		p = strchr(p + 1, ' ');
	unsigned long long ticks;
	if (!p || sscanf(p, " %llu", &ticks) != 1)
		return -1;
	*start = ticks;
	return 0;
}

static int proc_dead(int32_t pid, uint64_t start)
{
	uint64_t now;
	if (kill(pid, 0) == -1 && errno == ESRCH)
		return 1;
	return proc_start(pid, &now) == 0 && now != start;
}

/* Copy slot `slot` into p; 0: not shown (not LIVE, nonsense, or changed
 * while copied). */
static int proc_copy(const struct kr_carea_proc *src, unsigned slot, struct proc_copy *p)
{
	if (__atomic_load_n(&src->state, __ATOMIC_ACQUIRE) != KR_CA_SLOT_LIVE)
		return 0;
	p->slot = slot;
	p->pid = LD(src->pid);
	p->start = LD(src->start);
	if (p->pid <= 0)
		return 0;
	p->nvp = LD(src->nvp);
	p->parallelism = LD(src->parallelism);
	p->want = LD(src->want);
	p->grant = LD(src->grant);
	p->running = LD(src->running);
	for (size_t i = 0; i < sizeof p->comm; i++)
		p->comm[i] = LD(src->comm[i]);
	if (!memchr(p->comm, 0, sizeof p->comm))
		return 0;
	printable(p->comm);
	p->nshown = p->nvp < KR_CAREA_VPS ? p->nvp : KR_CAREA_VPS;
	for (unsigned i = 0; i < p->nshown; i++) {
		const struct kr_carea_vp *v = &src->vp[i];
		struct vp_copy *c = &p->vp[i];
		c->status = LD(v->status);
		c->tid = LD(v->tid);
		c->count[SWITCHES] = LD(v->switches);
		c->count[SUSPENSIONS] = LD(v->suspensions);
		c->count[RECOVERIES] = LD(v->recoveries);
		c->count[PREEMPTIONS] = LD(v->preemptions);
	}
	__atomic_thread_fence(__ATOMIC_ACQUIRE);
	if (LD(src->state) != KR_CA_SLOT_LIVE || LD(src->pid) != p->pid ||
	    LD(src->start) != p->start)
		return 0;
	p->dead = proc_dead(p->pid, p->start);
	if (p->dead)
		p->nshown = 0;
	return 1;
}

static int seg_copy(const struct kr_carea_seg *g, const char *name, struct sample *s)
{
	uint64_t magic = __atomic_load_n(&g->magic, __ATOMIC_ACQUIRE);
	uint32_t version = LD(g->version), size = LD(g->size);
	if (magic == 0) {
		snprintf(s->why, sizeof s->why, "%s: not initialised yet (its creator is starting)",
			 name);
		return -1;
	}
	if (magic != KR_CAREA_MAGIC) {
		snprintf(s->why, sizeof s->why, "%s: not a C-area segment (magic %#llx)", name,
			 (unsigned long long)magic);
		return -1;
	}
	if (version != KR_CAREA_VERSION) {
		snprintf(s->why, sizeof s->why,
			 "%s: C-area version %u; this karui-top reads version %u", name, version,
			 KR_CAREA_VERSION);
		return -1;
	}
	if (size != sizeof *g) {
		snprintf(s->why, sizeof s->why,
			 "%s: its header gives a size of %u bytes; version %u's is %zu", name, size,
			 KR_CAREA_VERSION, sizeof *g);
		return -1;
	}
	s->ncpu = LD(g->ncpu);
	s->epoch = LD(g->epoch);
	s->nproc = 0;
	s->grants = 0;
	for (unsigned i = 0; i < KR_CAREA_PROCS; i++)
		if (proc_copy(&g->proc[i], i, &s->proc[s->nproc]))
			s->grants += s->proc[s->nproc++].grant;
	return 0;
}

static sigjmp_buf bus_jmp;
static volatile sig_atomic_t bus_armed;

static void on_bus(int sig)
{
	if (bus_armed)
		siglongjmp(bus_jmp, 1);
	signal(sig, SIG_DFL); /* not the segment's: let it end the process */
}

/* Take a sample of segment `name` into s (s->ok says whether it could). */
static void sample_take(const char *name, struct sample *s)
{
	s->ok = 0;
	s->t = now_ns();
	int fd = shm_open(name, O_RDONLY | O_CLOEXEC, 0);
	if (fd < 0) {
		if (errno == ENOENT)
			snprintf(s->why, sizeof s->why,
				 "%s: no such segment: no karui process uses the C-area", name);
		else
			snprintf(s->why, sizeof s->why, "%s: %s", name, strerror(errno));
		return;
	}
	struct stat st;
	const struct kr_carea_seg *g = MAP_FAILED;
	if (fstat(fd, &st) != 0)
		snprintf(s->why, sizeof s->why, "%s: %s", name, strerror(errno));
	else if ((uint64_t)st.st_size < sizeof *g)
		snprintf(s->why, sizeof s->why,
			 "%s: %lld bytes, not a C-area segment of version %u (%zu bytes)", name,
			 (long long)st.st_size, KR_CAREA_VERSION, sizeof *g);
	else if ((g = mmap(NULL, sizeof *g, PROT_READ, MAP_SHARED, fd, 0)) == MAP_FAILED)
		snprintf(s->why, sizeof s->why, "%s: mmap: %s", name, strerror(errno));
	close(fd);
	if (g == MAP_FAILED)
		return;
	if (sigsetjmp(bus_jmp, 1) == 0) {
		bus_armed = 1;
		s->ok = seg_copy(g, name, s) == 0;
	} else {
		snprintf(s->why, sizeof s->why, "%s: truncated while being read", name);
	}
	bus_armed = 0;
	munmap((void *)g, sizeof *g);
}

/* ---------------- rates ---------------- */

static const struct proc_copy *proc_find(const struct sample *s, const struct proc_copy *p)
{
	for (unsigned i = 0; i < s->nproc; i++) {
		const struct proc_copy *q = &s->proc[i];
		if (q->slot == p->slot && q->pid == p->pid && q->start == p->start && !q->dead)
			return q;
	}
	return NULL;
}

static double rate(uint64_t now, uint64_t then, double secs)
{
	return now >= then ? (double)(now - then) / secs : NO_RATE;
}

/* Fill cur's rates from its counters and prev's (NULL: no earlier sample). */
static void rates(struct sample *cur, const struct sample *prev)
{
	double secs = prev && prev->ok ? (double)(cur->t - prev->t) / 1e9 : 0;
	int have = secs > 0;
	cur->epoch_rate = have ? rate(cur->epoch, prev->epoch, secs) : NO_RATE;
	for (unsigned i = 0; i < cur->nproc; i++) {
		struct proc_copy *p = &cur->proc[i];
		const struct proc_copy *q = have ? proc_find(prev, p) : NULL;
		for (int k = 0; k < NCOUNT; k++)
			p->rate[k] = NO_RATE;
		for (unsigned j = 0; j < p->nshown; j++) {
			struct vp_copy *v = &p->vp[j];
			const struct vp_copy *w = q && j < q->nshown && q->vp[j].tid == v->tid
							  ? &q->vp[j] : NULL;
			for (int k = 0; k < NCOUNT; k++) {
				v->rate[k] = w ? rate(v->count[k], w->count[k], secs) : NO_RATE;
				if (v->rate[k] != NO_RATE)
					p->rate[k] = (p->rate[k] == NO_RATE ? 0 : p->rate[k]) + v->rate[k];
			}
		}
	}
}

/* ---------------- order ---------------- */

enum { SORT_PID, SORT_GRANT, SORT_RUNNING, SORT_PARALLELISM, SORT_SWITCHES, NSORT };
static const char *const sort_name[NSORT] = {"pid", "grant", "running", "parallelism",
					     "switches/s"};
static int sort_key;

static int by_key(const void *a, const void *b)
{
	const struct proc_copy *p = *(const struct proc_copy *const *)a;
	const struct proc_copy *q = *(const struct proc_copy *const *)b;
	double x = 0, y = 0; /* larger first */
	switch (sort_key) {
	case SORT_GRANT: x = p->grant, y = q->grant; break;
	case SORT_RUNNING: x = p->running, y = q->running; break;
	case SORT_PARALLELISM: x = p->parallelism, y = q->parallelism; break;
	case SORT_SWITCHES: x = p->rate[SWITCHES], y = q->rate[SWITCHES]; break;
	}
	if (x != y)
		return x > y ? -1 : 1;
	if (p->pid != q->pid)
		return p->pid < q->pid ? -1 : 1;
	return p->slot < q->slot ? -1 : 1;
}

/* s's processes in order of the sort key (--once: always by pid). */
static void sorted(const struct sample *s, const struct proc_copy **order)
{
	for (unsigned i = 0; i < s->nproc; i++)
		order[i] = &s->proc[i];
	qsort(order, s->nproc, sizeof order[0], by_key);
}

/* ---------------- text ---------------- */

static const char *status_word(uint32_t status)
{
	return status < KR_CA_NSTATUS ? status_name[status] : "?";
}

/* r in buf, "-" for NO_RATE; buf. */
static const char *fmt_rate(char *buf, size_t n, double r)
{
	if (r == NO_RATE)
		snprintf(buf, n, "-");
	else
		snprintf(buf, n, "%.1f", r);
	return buf;
}

/* --once: docs/karui-top.md, "The --once format". */
static void print_once(const char *name, const struct sample *s, double delay)
{
	char r[NCOUNT][32], er[32];
	printf("segment %s version %u ncpu %u epoch %llu epoch/s %s grants %llu procs %u "
	       "interval ",
	       name, KR_CAREA_VERSION, s->ncpu, (unsigned long long)s->epoch,
	       fmt_rate(er, sizeof er, s->epoch_rate), (unsigned long long)s->grants, s->nproc);
	if (delay > 0)
		printf("%.3f\n", delay);
	else
		printf("-\n");
	const struct proc_copy *order[KR_CAREA_PROCS];
	sorted(s, order);
	for (unsigned i = 0; i < s->nproc; i++) {
		const struct proc_copy *p = order[i];
		printf("proc pid %d comm %s state %s nvp %u parallelism %u want %u grant %u "
		       "running %u",
		       (int)p->pid, p->comm, p->dead ? "dead" : "live", p->nvp, p->parallelism,
		       p->want, p->grant, p->running);
		for (int k = 0; k < NCOUNT; k++)
			printf(" %s/s %s", count_name[k], fmt_rate(r[k], sizeof r[k], p->rate[k]));
		printf("\n");
		for (unsigned j = 0; j < p->nshown; j++) {
			const struct vp_copy *v = &p->vp[j];
			printf("  vp index %u tid %d status %s", j, (int)v->tid,
			       status_word(v->status));
			for (int k = 0; k < NCOUNT; k++)
				printf(" %s/s %s", count_name[k],
				       fmt_rate(r[k], sizeof r[k], v->rate[k]));
			printf("\n");
		}
	}
}

/* ---------------- the live view ---------------- */

/* Write all of buf; -1 if the terminal is gone. */
static int write_all(int fd, const char *buf, size_t len)
{
	while (len > 0) {
		ssize_t n = write(fd, buf, len);
		if (n < 0 && errno != EINTR)
			return -1;
		if (n > 0)
			buf += n, len -= (size_t)n;
	}
	return 0;
}

/* A frame, built whole and written at once (in pieces only when it is
 * larger than the buffer: thousands of rows). */
struct screen {
	int fd, err;
	int rows, cols, row;
	size_t len;
	char buf[1 << 16];
};

static void put(struct screen *sc, const char *s, size_t n)
{
	if (n > sizeof sc->buf - sc->len) {
		sc->err |= write_all(sc->fd, sc->buf, sc->len);
		sc->len = 0;
	}
	memcpy(sc->buf + sc->len, s, n);
	sc->len += n;
}

/* One line of the frame, cut to the width; `attr`: an SGR code for the
 * whole width, or NULL.  Past the height: nothing. */
static void line(struct screen *sc, const char *attr, const char *fmt, ...)
{
	char text[1024];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(text, sizeof text, fmt, ap);
	va_end(ap);
	if (sc->row >= sc->rows || n < 0)
		return;
	size_t len = (size_t)n < sizeof text ? (size_t)n : sizeof text - 1;
	if (len > (size_t)sc->cols)
		len = (size_t)sc->cols;
	if (sc->row++ > 0)
		put(sc, "\r\n", 2);
	put(sc, "\x1b[2K", 4);
	if (attr) {
		char on[16];
		put(sc, on, (size_t)snprintf(on, sizeof on, "\x1b[%sm", attr));
		put(sc, text, len);
		for (; len < (size_t)sc->cols; len++)
			put(sc, " ", 1);
		put(sc, "\x1b[m", 3);
	} else {
		put(sc, text, len);
	}
}

/* The columns: a process's, then its rates, which its VPs' lines share. */
#define PROC_COLS "%7s %-15s %-5s %4s %5s %5s %5s %5s "
#define RATE_COLS "%11s %13s %12s %13s"

static void draw_proc(struct screen *sc, const struct proc_copy *p)
{
	char r[NCOUNT][32], head[128], n[5][12];
	for (int k = 0; k < NCOUNT; k++)
		fmt_rate(r[k], sizeof r[k], p->rate[k]);
	snprintf(n[0], sizeof n[0], "%u", p->nvp);
	snprintf(n[1], sizeof n[1], "%u", p->parallelism);
	snprintf(n[2], sizeof n[2], "%u", p->want);
	snprintf(n[3], sizeof n[3], "%u", p->grant);
	snprintf(n[4], sizeof n[4], "%u", p->running);
	snprintf(head, sizeof head, "%d", (int)p->pid);
	line(sc, NULL, PROC_COLS RATE_COLS, head, p->comm, p->dead ? "dead" : "live", n[0],
	     n[1], n[2], n[3], n[4], r[0], r[1], r[2], r[3]);
	int width = snprintf(NULL, 0, PROC_COLS, "", "", "", "", "", "", "", "");
	for (unsigned j = 0; j < p->nshown; j++) {
		const struct vp_copy *v = &p->vp[j];
		for (int k = 0; k < NCOUNT; k++)
			fmt_rate(r[k], sizeof r[k], v->rate[k]);
		snprintf(head, sizeof head, "        vp %-3u tid %-8d %s", j, (int)v->tid,
			 status_word(v->status));
		line(sc, NULL, "%-*s " RATE_COLS, width - 1, head, r[0], r[1], r[2], r[3]);
	}
}

/* The frame of sample s on the terminal fd; -1 if the terminal is gone. */
static int draw(int fd, const char *name, const struct sample *s, double delay, int help)
{
	static struct screen sc;
	struct winsize ws;
	sc.fd = fd, sc.err = 0, sc.len = 0, sc.row = 0;
	sc.rows = 24, sc.cols = 80;
	if (ioctl(fd, TIOCGWINSZ, &ws) == 0 && ws.ws_row > 0 && ws.ws_col > 0)
		sc.rows = ws.ws_row, sc.cols = ws.ws_col;
	put(&sc, "\x1b[H", 3);
	if (!s->ok) {
		line(&sc, NULL, "karui-top  %s", name);
		line(&sc, NULL, "%s", s->why);
		line(&sc, NULL, "waiting for it: a look every %g s; q quits", delay);
	} else {
		char er[32];
		line(&sc, NULL, "karui-top  %s  ncpu %u  grants %llu/%u  epoch %llu (%s/s)"
				"  procs %u  sort %s  (h: help)",
		     name, s->ncpu, (unsigned long long)s->grants, s->ncpu,
		     (unsigned long long)s->epoch, fmt_rate(er, sizeof er, s->epoch_rate), s->nproc,
		     sort_name[sort_key]);
		if (help)
			line(&sc, NULL, "q quit  s sort by pid, grant, running, parallelism, "
					"switches/s  h hide this line  (refresh %g s)", delay);
		line(&sc, "7", PROC_COLS RATE_COLS, "PID", "COMM", "STATE", "NVP", "PAR", "WANT",
		     "GRANT", "RUN", "SWITCHES/s", "SUSPENSIONS/s", "RECOVERIES/s",
		     "PREEMPTIONS/s");
		const struct proc_copy *order[KR_CAREA_PROCS];
		sorted(s, order);
		for (unsigned i = 0; i < s->nproc; i++)
			draw_proc(&sc, order[i]);
	}
	put(&sc, "\x1b[J", 3);
	return sc.err | write_all(fd, sc.buf, sc.len);
}

static struct termios saved_tio;
static volatile sig_atomic_t got_end, got_winch, got_tstp;
static const int live_signals[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGWINCH, SIGTSTP};
#define NLIVE_SIGNALS (sizeof live_signals / sizeof live_signals[0])

static void on_signal(int sig)
{
	if (sig == SIGWINCH)
		got_winch = 1;
	else if (sig == SIGTSTP)
		got_tstp = 1;
	else
		got_end = sig;
}

static void handle(int sig, void (*fn)(int))
{
	struct sigaction sa = {.sa_handler = fn};
	sigaction(sig, &sa, NULL);
}

/* The terminal as the view needs it, and as it was. */
static void term_enter(void)
{
	struct termios raw = saved_tio;
	raw.c_lflag &= ~(tcflag_t)(ICANON | ECHO);
	raw.c_cc[VMIN] = 1;
	raw.c_cc[VTIME] = 0;
	tcsetattr(STDIN_FILENO, TCSANOW, &raw);
	static const char enter[] = "\x1b[?1049h\x1b[?25l";
	write_all(STDOUT_FILENO, enter, sizeof enter - 1);
}

static void term_leave(void)
{
	static const char leave[] = "\x1b[?1049l\x1b[?25h";
	write_all(STDOUT_FILENO, leave, sizeof leave - 1);
	tcsetattr(STDIN_FILENO, TCSANOW, &saved_tio);
}

/* Ctrl-Z: the terminal as it was, stopped; back in view when continued. */
static void suspend(const sigset_t *blocked)
{
	sigset_t tstp;
	sigemptyset(&tstp);
	sigaddset(&tstp, SIGTSTP);
	term_leave();
	handle(SIGTSTP, SIG_DFL);
	raise(SIGTSTP);                        /* pending while blocked, */
	sigprocmask(SIG_UNBLOCK, &tstp, NULL); /* and it stops here */
	sigprocmask(SIG_BLOCK, blocked, NULL);
	handle(SIGTSTP, on_signal);
	term_enter();
}

/* The keys typed; 1 when one of them was q (or the terminal is gone). */
static int keys(int *help)
{
	char k[64];
	ssize_t n = read(STDIN_FILENO, k, sizeof k);
	if (n <= 0)
		return n == 0 || errno != EINTR;
	for (ssize_t i = 0; i < n; i++) {
		if (k[i] == 'q')
			return 1;
		if (k[i] == 's')
			sort_key = (sort_key + 1) % NSORT;
		if (k[i] == 'h')
			*help = !*help;
	}
	return 0;
}

static int run_live(const char *name, double delay)
{
	static struct sample a, b;
	if (!isatty(STDIN_FILENO) || !isatty(STDOUT_FILENO) ||
	    tcgetattr(STDIN_FILENO, &saved_tio) != 0) {
		fprintf(stderr, "karui-top: the live view needs a terminal; --once prints a "
				"snapshot\n");
		return 2;
	}
	sigset_t blocked, waiting;
	sigemptyset(&blocked);
	for (size_t i = 0; i < NLIVE_SIGNALS; i++) {
		sigaddset(&blocked, live_signals[i]);
		handle(live_signals[i], on_signal);
	}
	sigprocmask(SIG_BLOCK, &blocked, &waiting);
	for (size_t i = 0; i < NLIVE_SIGNALS; i++)
		sigdelset(&waiting, live_signals[i]);

	term_enter();
	uint64_t period = (uint64_t)(delay * 1e9), next = now_ns();
	struct sample *cur = &a, *prev = &b;
	int help = 0, quit = 0, redraw = 0;
	while (!quit && !got_end) {
		uint64_t t = now_ns();
		if (t >= next) {
			struct sample *x = prev;
			prev = cur, cur = x;
			sample_take(name, cur);
			rates(cur, prev);
			next = next + period > t ? next + period : t + period;
			redraw = 1;
		}
		if (redraw && draw(STDOUT_FILENO, name, cur, delay, help) != 0)
			break;
		redraw = 0;
		t = now_ns();
		uint64_t left = next > t ? next - t : 0;
		struct timespec ts = {.tv_sec = (time_t)(left / 1000000000u),
				      .tv_nsec = (long)(left % 1000000000u)};
		struct pollfd pfd = {.fd = STDIN_FILENO, .events = POLLIN};
		int n = ppoll(&pfd, 1, &ts, &waiting);
		if (n < 0 && errno != EINTR)
			break;
		if (got_winch)
			got_winch = 0, redraw = 1;
		if (got_tstp) {
			got_tstp = 0, redraw = 1;
			suspend(&blocked);
		}
		if (n > 0) {
			/* POLLHUP or POLLERR alone: the terminal is gone */
			quit = pfd.revents & POLLIN ? keys(&help) : 1;
			redraw = 1;
		}
	}
	term_leave();
	if (got_end) {
		handle(got_end, SIG_DFL);
		raise(got_end);
		sigprocmask(SIG_SETMASK, &waiting, NULL); /* it ends the process here */
	}
	return 0;
}

/* ---------------- the command line ---------------- */

static const char usage[] =
	"usage: karui-top [--once] [-d SECONDS] [--segment NAME]\n"
	"  The user's karui processes in the C-area: their VPs, their demand and\n"
	"  the processors granted to them (docs/karui-top.md).\n"
	"  --once          print one snapshot as text and exit; its rates are over\n"
	"                  -d SECONDS (0.2 unless told; 0: one read, every rate -)\n"
	"  -d SECONDS      the live view's refresh (1 unless told; 0.05 at least)\n"
	"  --segment NAME  the segment, /NAME (else $KARUI_CAREA_SEGMENT, else\n"
	"                  /karui-carea-UID)\n"
	"  --help          this text\n"
	"  Keys: q quits, s cycles the sort key, h shows the help line.\n"
	"  Exit: 0 ok, 1 no segment or another version of it, 2 bad usage.\n";

static int bad_usage(const char *why, const char *arg)
{
	fprintf(stderr, "karui-top: %s%s\n%s", why, arg, usage);
	return 2;
}

/* A name karui-top can print as one word: "/" and up to 200 bytes of
 * printable ASCII, no space. */
static int name_ok(const char *name)
{
	size_t n = strlen(name);
	if (name[0] != '/' || n < 2 || n > 200)
		return 0;
	for (size_t i = 1; i < n; i++)
		if (name[i] < '!' || name[i] > '~')
			return 0;
	return 1;
}

static int run_once(const char *name, double interval)
{
	static struct sample first, second;
	struct sample *s = &first;
	sample_take(name, &first);
	if (first.ok && interval > 0) {
		struct timespec ts = {.tv_sec = (time_t)interval,
				      .tv_nsec = (long)((interval - (double)(time_t)interval) * 1e9)};
		while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
			;
		sample_take(name, &second);
		s = &second;
	}
	if (!s->ok) {
		fprintf(stderr, "karui-top: %s\n", s->why);
		return 1;
	}
	rates(s, s == &second ? &first : NULL);
	print_once(name, s, interval);
	return fflush(stdout) == 0 ? 0 : 1;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{"once", no_argument, NULL, 'o'},
		{"segment", required_argument, NULL, 'S'},
		{"help", no_argument, NULL, 'h'},
		{0}};
	int once = 0, c;
	double delay = -1; /* not given */
	const char *name = getenv("KARUI_CAREA_SEGMENT");
	char byuid[64];
	while ((c = getopt_long(argc, argv, "d:", opts, NULL)) != -1) {
		char *end;
		switch (c) {
		case 'o': once = 1; break;
		case 'S': name = optarg; break;
		case 'h': fputs(usage, stdout); return 0;
		case 'd':
			delay = strtod(optarg, &end);
			if (end == optarg || *end || !(delay >= 0 && delay <= 3600))
				return bad_usage("-d wants seconds, 0 to 3600: ", optarg);
			break;
		default: return bad_usage("", "");
		}
	}
	if (optind < argc)
		return bad_usage("unexpected argument: ", argv[optind]);
	if (!name || !*name) {
		snprintf(byuid, sizeof byuid, "/karui-carea-%u", (unsigned)getuid());
		name = byuid;
	}
	if (!name_ok(name))
		return bad_usage("a segment's name is / and 1 to 199 printable bytes, no "
				 "space: ", name);
	handle(SIGBUS, on_bus);
	if (once)
		return run_once(name, delay < 0 ? 0.2 : delay);
	if (delay >= 0 && delay < 0.05)
		return bad_usage("the live view refreshes every 0.05 s at most", "");
	return run_live(name, delay < 0 ? 1 : delay);
}
