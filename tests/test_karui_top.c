/*
 * karui-top (tools/karui-top) against segments the test makes itself,
 * under names of its own ("/karui-top-test-PID-TAG", unlinked at the end
 * whatever happened), with processes whose pid and start time it knows:
 * its own, its parent's, and one that has ended.  --once's lines are
 * compared whole (docs/karui-top.md gives the format); the live view runs
 * on a pseudo-terminal, read frame by frame (a frame starts with ESC[H and
 * ends with ESC[J), with keys typed and signals sent to it.
 */
#include "kt.h"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <pty.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <termios.h>

#include "layout.h"

static pid_t main_pid; /* the names' PID: the process that unlinks them */
static const char *const tags[] = {"values", "dead", "rates", "random", "version",
				   "env", "shrink", "live", "signal", "window", "late", "idle"};

static void seg_name(char *buf, size_t n, const char *tag)
{
	snprintf(buf, n, "/karui-top-test-%d-%s", (int)main_pid, tag);
}

/* ---------------- making segments ---------------- */

/* The start time of pid, as karui-top compares it (/proc/PID/stat 22). */
static uint64_t start_of(pid_t pid)
{
	char path[40], buf[1024];
	snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
	FILE *f = fopen(path, "r");
	KT_CHECK(f);
	size_t n = fread(buf, 1, sizeof buf - 1, f);
	fclose(f);
	buf[n] = 0;
	char *p = strrchr(buf, ')');
	for (int field = 2; p && field < 22; field++)
		p = strchr(p + 1, ' ');
	unsigned long long start;
	KT_CHECK(p && sscanf(p, " %llu", &start) == 1);
	return start;
}

/* A new segment of `size` bytes with a valid header: ncpu 4, epoch 7. */
static struct kr_carea_seg *seg_make(const char *tag, char *name, size_t n, size_t size)
{
	seg_name(name, n, tag);
	int fd = shm_open(name, O_CREAT | O_EXCL | O_RDWR, 0600);
	KT_CHECK(fd >= 0);
	KT_EQ(ftruncate(fd, (off_t)size), 0);
	struct kr_carea_seg *g = mmap(NULL, sizeof *g, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	KT_CHECK(g != MAP_FAILED);
	close(fd);
	if (size < sizeof *g)
		return g;
	g->version = KR_CAREA_VERSION;
	g->size = sizeof *g;
	g->ncpu = 4;
	g->epoch = 7;
	__atomic_store_n(&g->magic, KR_CAREA_MAGIC, __ATOMIC_RELEASE);
	return g;
}

/* Slot i LIVE for pid with VPs of the given statuses, tids 1001, 1002... */
static struct kr_carea_proc *slot_live(struct kr_carea_seg *g, unsigned i, pid_t pid,
				       uint64_t start, const char *comm, const uint32_t *status,
				       unsigned nvp)
{
	struct kr_carea_proc *p = &g->proc[i];
	memset(p, 0, sizeof *p);
	p->pid = pid;
	p->start = start;
	p->nvp = nvp;
	snprintf(p->comm, sizeof p->comm, "%s", comm);
	for (unsigned j = 0; j < nvp && j < KR_CAREA_VPS; j++) {
		p->vp[j].status = status[j];
		p->vp[j].tid = 1001 + (int32_t)j;
	}
	__atomic_store_n(&p->state, KR_CA_SLOT_LIVE, __ATOMIC_RELEASE);
	return p;
}

static pid_t dead_pid(void)
{
	pid_t pid = fork();
	KT_CHECK(pid >= 0);
	if (pid == 0)
		_exit(0);
	KT_EQ(waitpid(pid, NULL, 0), pid);
	return pid;
}

/* ---------------- running karui-top --once ---------------- */

struct out {
	int status; /* exit code; 128 + signal */
	char out[1 << 16], err[4096];
};

static void slurp(int fd, char *buf, size_t cap)
{
	lseek(fd, 0, SEEK_SET);
	ssize_t n = read(fd, buf, cap - 1);
	buf[n > 0 ? n : 0] = 0;
	close(fd);
}

/* karui-top with args (NULL-terminated), KARUI_CAREA_SEGMENT=env or unset. */
static void run_top(struct out *o, const char *env, const char *const *args)
{
	char *argv[16] = {KARUI_TOP};
	for (int i = 0; args[i]; i++)
		argv[i + 1] = (char *)args[i];
	int fo = memfd_create("out", 0), fe = memfd_create("err", 0);
	KT_CHECK(fo >= 0 && fe >= 0);
	pid_t pid = fork();
	if (pid == 0) {
		dup2(fo, 1);
		dup2(fe, 2);
		if (env)
			setenv("KARUI_CAREA_SEGMENT", env, 1);
		else
			unsetenv("KARUI_CAREA_SEGMENT");
		execv(argv[0], argv);
		_exit(127);
	}
	int st;
	KT_EQ(waitpid(pid, &st, 0), pid);
	o->status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
	slurp(fo, o->out, sizeof o->out);
	slurp(fe, o->err, sizeof o->err);
}

static void once(struct out *o, const char *name, const char *delay)
{
	run_top(o, NULL, (const char *const[]){"--once", "-d", delay, "--segment", name, NULL});
}

/* The output holds this line, whole. */
static int has_line(const char *out, const char *want)
{
	size_t n = strlen(want);
	for (const char *p = out; (p = strstr(p, want)); p++)
		if ((p == out || p[-1] == '\n') && p[n] == '\n')
			return 1;
	return 0;
}

#define KT_LINE(out, ...)                                                      \
	do {                                                                   \
		char want_[512];                                               \
		snprintf(want_, sizeof want_, __VA_ARGS__);                    \
		if (!has_line(out, want_)) {                                   \
			fprintf(stderr, "  %s:%d: no line \"%s\" in:\n%s",     \
				__FILE__, __LINE__, want_, out);               \
			_exit(1);                                              \
		}                                                              \
	} while (0)

#define NO_RATES "switches/s - suspensions/s - recoveries/s - preemptions/s -"

static void once_shows_a_live_process_with_its_values_and_vp_statuses(void)
{
	char name[96];
	struct kr_carea_seg *g = seg_make("values", name, sizeof name, sizeof *g);
	uint32_t st[3] = {KR_CA_RUNNING, KR_CA_SUSPENDED, KR_CA_RECOVERED};
	struct kr_carea_proc *p = slot_live(g, 3, getpid(), start_of(getpid()), "kt-live", st, 3);
	p->parallelism = 5, p->want = 3, p->grant = 2, p->running = 1;
	struct out o;
	once(&o, name, "0");
	KT_EQ(o.status, 0);
	KT_EQ(o.err[0], 0);
	KT_LINE(o.out, "segment %s version %u ncpu 4 epoch 7 epoch/s - grants 2 procs 1 interval -",
		name, KR_CAREA_VERSION);
	KT_LINE(o.out, "proc pid %d comm kt-live state live nvp 3 parallelism 5 want 3 grant 2 "
		       "running 1 " NO_RATES, (int)getpid());
	KT_LINE(o.out, "  vp index 0 tid 1001 status running " NO_RATES);
	KT_LINE(o.out, "  vp index 1 tid 1002 status suspended " NO_RATES);
	KT_LINE(o.out, "  vp index 2 tid 1003 status recovered " NO_RATES);
	KT_CHECK(!strstr(o.out, "vp index 3"));
}

static void once_marks_ended_and_reused_pids_dead(void)
{
	char name[96];
	struct kr_carea_seg *g = seg_make("dead", name, sizeof name, sizeof *g);
	uint32_t st[2] = {KR_CA_RUNNING, KR_CA_IDLE};
	pid_t gone = dead_pid();
	slot_live(g, 0, gone, 1, "kt-gone", st, 2)->grant = 1;
	slot_live(g, 1, getpid(), start_of(getpid()) + 1, "kt-reused", st, 2)->grant = 1;
	struct out o;
	once(&o, name, "0.05");
	KT_EQ(o.status, 0);
	KT_LINE(o.out, "segment %s version %u ncpu 4 epoch 7 epoch/s 0.0 grants 2 procs 2 "
		       "interval 0.050", name, KR_CAREA_VERSION);
	KT_LINE(o.out, "proc pid %d comm kt-gone state dead nvp 2 parallelism 0 want 0 grant 1 "
		       "running 0 " NO_RATES, (int)gone);
	KT_LINE(o.out, "proc pid %d comm kt-reused state dead nvp 2 parallelism 0 want 0 "
		       "grant 1 running 0 " NO_RATES, (int)getpid());
	KT_CHECK(!strstr(o.out, "  vp "));
	/* in order of pid (not of slot) */
	char gone_pid[32];
	snprintf(gone_pid, sizeof gone_pid, "proc pid %d ", (int)gone);
	KT_CHECK((strstr(o.out, gone_pid) < strstr(o.out, "comm kt-reused")) == (gone < getpid()));
}

/* A thread of the segment's "process" at work: switches on VP 0 and
 * allocations, while karui-top samples twice, a second apart. */
struct bumper {
	struct kr_carea_seg *g;
	uint32_t stop;
};

static void *bump(void *a)
{
	struct bumper *b = a;
	while (!__atomic_load_n(&b->stop, __ATOMIC_ACQUIRE)) {
		__atomic_fetch_add(&b->g->proc[0].vp[0].switches, 10, __ATOMIC_RELAXED);
		__atomic_fetch_add(&b->g->epoch, 1, __ATOMIC_RELAXED);
		kt_nap_us(1000);
	}
	return NULL;
}

static double field(const char *line, const char *key)
{
	const char *p = strstr(line, key);
	KT_CHECK(p);
	return strtod(p + strlen(key), NULL);
}

static void once_rates_are_counter_differences_per_second(void)
{
	char name[96];
	struct kr_carea_seg *g = seg_make("rates", name, sizeof name, sizeof *g);
	uint32_t st[2] = {KR_CA_RUNNING, KR_CA_BLOCKED};
	struct kr_carea_proc *p = slot_live(g, 0, getpid(), start_of(getpid()), "kt-rates", st, 2);
	p->vp[1].suspensions = 40, p->vp[1].recoveries = 3, p->vp[1].preemptions = 9;
	struct bumper b = {.g = g};
	pthread_t t;
	KT_EQ(pthread_create(&t, NULL, bump, &b), 0);
	struct out o;
	once(&o, name, "1");
	__atomic_store_n(&b.stop, 1, __ATOMIC_RELEASE);
	KT_EQ(pthread_join(t, NULL), 0);
	KT_EQ(o.status, 0);
	char *head = o.out, *proc = strstr(o.out, "proc pid"), *vp0 = strstr(o.out, "  vp index 0");
	KT_CHECK(proc && vp0 && strstr(head, "interval 1.000\n"));
	double sw = field(vp0, "switches/s ");
	fprintf(stderr, "  vp 0: %.1f switches/s, %.1f allocations/s\n", sw,
		field(head, "epoch/s "));
	KT_CHECK(sw > 0 && sw < 1e5 && field(head, "epoch/s ") > 0);
	KT_CHECK(field(proc, "switches/s ") == sw); /* the sum of one VP's */
	KT_CHECK(strstr(vp0, "suspensions/s 0.0 recoveries/s 0.0 preemptions/s 0.0\n"));
	KT_LINE(o.out, "  vp index 1 tid 1002 status blocked switches/s 0.0 suspensions/s 0.0 "
		       "recoveries/s 0.0 preemptions/s 0.0");
}

/* Every line printable ASCII, and its VPs' lines no more than KR_CAREA_VPS
 * after each process's. */
static void check_sane(const char *out)
{
	unsigned vps = 0;
	for (const char *c = out; *c; c++)
		KT_CHECK(*c == '\n' || (*c >= ' ' && *c <= '~'));
	for (const char *l = out; *l; l = strchr(l, '\n') + 1) {
		KT_CHECK(strchr(l, '\n'));
		if (!strncmp(l, "proc ", 5))
			vps = 0;
		else if (!strncmp(l, "  vp ", 5))
			KT_CHECK(++vps <= KR_CAREA_VPS);
		else
			KT_CHECK(!strncmp(l, "segment ", 8) && l == out);
	}
}

static void once_survives_slots_of_random_bytes(void)
{
	char name[96];
	struct kr_carea_seg *g = seg_make("random", name, sizeof name, sizeof *g);
	for (int round = 0; round < 20; round++) {
		for (unsigned i = 0; i < KR_CAREA_PROCS; i++)
			KT_EQ(getrandom(&g->proc[i], sizeof g->proc[i], 0), sizeof g->proc[i]);
		/* LIVE, a live pid, a comm with an escape: the rest is noise */
		struct kr_carea_proc *p = &g->proc[5];
		p->state = KR_CA_SLOT_LIVE, p->pid = getpid(), p->start = start_of(getpid());
		memcpy(p->comm, "kt\x1b[2J\x7f\tx", 10);
		p->nvp = 1000 + (uint32_t)round;
		p->vp[0].status = 0xdeadbeef;
		p->vp[1].status = KR_CA_NSTATUS;
		p->vp[2].status = KR_CA_RECOVERING;
		/* a comm with no NUL: not shown */
		p = &g->proc[6];
		p->state = KR_CA_SLOT_LIVE, p->pid = getpid(), p->start = start_of(getpid());
		memset(p->comm, 'z', sizeof p->comm);
		/* pid 0 and a negative one: not shown */
		g->proc[7].state = KR_CA_SLOT_LIVE, g->proc[7].pid = 0;
		g->proc[8].state = KR_CA_SLOT_LIVE, g->proc[8].pid = -5;
		g->ncpu = (uint32_t)random();
		struct out o;
		once(&o, name, round % 2 ? "0" : "0.01");
		KT_EQ(o.status, 0);
		check_sane(o.out);
		char *me = strstr(o.out, "proc pid");
		KT_CHECK(me && strstr(me, "comm kt?[2J??x state live nvp "));
		KT_CHECK(!strstr(me + 1, "proc pid"));
		KT_CHECK(strstr(me, "  vp index 0 tid "));
		KT_CHECK(strstr(me, "  vp index 31 tid "));
		KT_CHECK(strstr(strstr(me, "  vp index 0 "), " status ? "));
		KT_CHECK(strstr(strstr(me, "  vp index 1 "), " status ? "));
		KT_CHECK(strstr(strstr(me, "  vp index 2 "), " status recovering "));
	}
	/* and the header's own nonsense: another magic */
	g->magic = 0x1234;
	struct out o;
	once(&o, name, "0");
	KT_EQ(o.status, 1);
	KT_CHECK(strstr(o.err, "not a C-area segment"));
}

static void once_refuses_another_version_or_size_with_exit_1(void)
{
	char name[96];
	struct kr_carea_seg *g = seg_make("version", name, sizeof name, sizeof *g);
	uint32_t st[1] = {KR_CA_RUNNING};
	slot_live(g, 0, getpid(), start_of(getpid()), "kt-v", st, 1);
	struct out o;
	g->version = KR_CAREA_VERSION + 1;
	once(&o, name, "0");
	KT_EQ(o.status, 1);
	KT_EQ(o.out[0], 0);
	fprintf(stderr, "  %s", o.err);
	char want[80];
	snprintf(want, sizeof want, "C-area version %u; this karui-top reads version %u",
		 KR_CAREA_VERSION + 1, KR_CAREA_VERSION);
	KT_CHECK(strstr(o.err, want));
	g->version = KR_CAREA_VERSION;
	g->size = sizeof *g + 8;
	once(&o, name, "0");
	KT_EQ(o.status, 1);
	KT_CHECK(strstr(o.err, "size"));
	g->size = sizeof *g;
	g->magic = 0; /* its creator has not finished */
	once(&o, name, "0");
	KT_EQ(o.status, 1);
	KT_CHECK(strstr(o.err, "not initialised yet"));
	g->magic = KR_CAREA_MAGIC;
	once(&o, name, "0");
	KT_EQ(o.status, 0);
	/* an object smaller than the layout (it is not mapped past its end) */
	int fd = shm_open(name, O_RDWR, 0);
	KT_CHECK(fd >= 0);
	KT_EQ(ftruncate(fd, 100), 0);
	close(fd);
	once(&o, name, "0");
	KT_EQ(o.status, 1);
	KT_CHECK(strstr(o.err, "100 bytes"));
}

/* A thread of the segment's owner that shrinks it and grows it back. */
static void *shrink(void *a)
{
	struct bumper *b = a;
	char name[96];
	seg_name(name, sizeof name, "shrink");
	int fd = shm_open(name, O_RDWR, 0);
	KT_CHECK(fd >= 0);
	while (!__atomic_load_n(&b->stop, __ATOMIC_ACQUIRE)) {
		KT_EQ(ftruncate(fd, sizeof *b->g / 2), 0);
		KT_EQ(ftruncate(fd, sizeof *b->g), 0);
	}
	close(fd);
	return NULL;
}

static void once_survives_its_segment_shrinking_under_it(void)
{
	char name[96];
	struct kr_carea_seg *g = seg_make("shrink", name, sizeof name, sizeof *g);
	uint32_t st[1] = {KR_CA_RUNNING};
	slot_live(g, KR_CAREA_PROCS - 1, getpid(), start_of(getpid()), "kt-shrink", st, 1);
	struct bumper b = {.g = g};
	pthread_t t;
	KT_EQ(pthread_create(&t, NULL, shrink, &b), 0);
	unsigned runs = 0, cut = 0;
	for (uint64_t t0 = kt_mono_ns(); kt_mono_ns() - t0 < 2000000000ull; runs++) {
		struct out o;
		once(&o, name, "0");
		KT_CHECK(o.status == 0 || o.status == 1);
		cut += strstr(o.err, "truncated while being read") != NULL;
	}
	__atomic_store_n(&b.stop, 1, __ATOMIC_RELEASE);
	KT_EQ(pthread_join(t, NULL), 0);
	fprintf(stderr, "  %u runs, %u saw it shrink while copying\n", runs, cut);
}

static void once_on_a_missing_segment_exits_1(void)
{
	char name[96];
	seg_name(name, sizeof name, "never-made");
	struct out o;
	once(&o, name, "0");
	KT_EQ(o.status, 1);
	KT_EQ(o.out[0], 0);
	KT_CHECK(strstr(o.err, "no such segment"));
}

static void the_environment_names_the_segment_and_the_option_wins(void)
{
	char name[96], missing[96];
	struct kr_carea_seg *g = seg_make("env", name, sizeof name, sizeof *g);
	seg_name(missing, sizeof missing, "never-made");
	uint32_t st[1] = {KR_CA_IDLE};
	slot_live(g, 0, getpid(), start_of(getpid()), "kt-env", st, 1);
	struct out o;
	run_top(&o, name, (const char *const[]){"--once", "-d", "0", NULL});
	KT_EQ(o.status, 0);
	KT_CHECK(strstr(o.out, "comm kt-env "));
	run_top(&o, missing, (const char *const[]){"--once", "-d", "0", "--segment", name, NULL});
	KT_EQ(o.status, 0);
	run_top(&o, missing, (const char *const[]){"--once", "-d", "0", NULL});
	KT_EQ(o.status, 1);
}

static void bad_usage_exits_2_and_help_exits_0(void)
{
	static const char *const bad[][4] = {
		{"--once", "-d", "-1"}, {"--once", "-d", "x"}, {"--once", "-d", "1e9"},
		{"--nope"}, {"--once", "extra"}, {"--once", "--segment", "noslash"},
		{"--once", "--segment", "/with space"}, {"-d", "0.01"}, {"-d", "0"}};
	struct out o;
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		const char *args[5] = {0};
		memcpy(args, bad[i], sizeof bad[i]);
		run_top(&o, NULL, args);
		KT_EQ(o.status, 2);
		KT_CHECK(strstr(o.err, "usage: karui-top"));
	}
	run_top(&o, NULL, (const char *const[]){"--help", NULL});
	KT_EQ(o.status, 0);
	KT_CHECK(strstr(o.out, "usage: karui-top") && strstr(o.out, "--once"));
	/* the live view wants a terminal: here it has none */
	run_top(&o, NULL, (const char *const[]){NULL});
	KT_EQ(o.status, 2);
	KT_CHECK(strstr(o.err, "needs a terminal"));
}

/* ---------------- the live view on a pseudo-terminal ---------------- */

struct live {
	pid_t pid;
	int master, slave;
	struct termios before;
	size_t len, seen; /* output read; where the next look starts */
	char buf[1 << 22];
};

static struct live lv;

static void live_start(const char *const *args, unsigned short rows, unsigned short cols)
{
	struct winsize ws = {.ws_row = rows, .ws_col = cols};
	KT_EQ(openpty(&lv.master, &lv.slave, NULL, NULL, &ws), 0);
	KT_EQ(tcgetattr(lv.slave, &lv.before), 0);
	KT_CHECK(lv.before.c_lflag & ICANON && lv.before.c_lflag & ECHO);
	char *argv[16] = {KARUI_TOP};
	for (int i = 0; args[i]; i++)
		argv[i + 1] = (char *)args[i];
	lv.pid = fork();
	if (lv.pid == 0) {
		setsid();
		ioctl(lv.slave, TIOCSCTTY, 0);
		dup2(lv.slave, 0), dup2(lv.slave, 1), dup2(lv.slave, 2);
		close(lv.master);
		execv(argv[0], argv);
		_exit(127);
	}
	lv.len = lv.seen = 0;
}

/* Read what karui-top wrote, up to `ms` milliseconds for more. */
static void live_read(int ms)
{
	struct pollfd p = {.fd = lv.master, .events = POLLIN};
	if (poll(&p, 1, ms) <= 0)
		return;
	ssize_t n = read(lv.master, lv.buf + lv.len, sizeof lv.buf - 1 - lv.len);
	if (n > 0)
		lv.len += (size_t)n;
	lv.buf[lv.len] = 0;
}

static char *find(const char *from, const char *text)
{
	return memmem(from, lv.buf + lv.len - from, text, strlen(text));
}

/* Wait for text to come after what earlier looks saw; then after it. */
#define LIVE_EXPECT(text)                                                      \
	do {                                                                   \
		KT_WAIT(find(lv.buf + lv.seen, text), live_read(100));         \
		lv.seen = (size_t)(find(lv.buf + lv.seen, text) - lv.buf) + strlen(text); \
	} while (0)

/* The next whole frame: its lines, escapes and CRs taken out, into
 * lines[]; their count. */
static unsigned live_frame(char lines[][1024], unsigned max)
{
	char *end;
	KT_WAIT((end = find(lv.buf + lv.seen, "\x1b[J")), live_read(100));
	char *start = end; /* its start may be before what was seen */
	while (start > lv.buf && strncmp(start, "\x1b[H", 3))
		start--;
	KT_CHECK(!strncmp(start, "\x1b[H", 3));
	lv.seen = (size_t)(end - lv.buf) + 3;
	unsigned n = 0, col = 0;
	lines[0][0] = 0;
	for (char *c = start + 3; c < end; c++) {
		if (*c == '\x1b') { /* CSI: ESC [ parameters, then a letter */
			KT_EQ(c[1], '[');
			for (c += 2; !(*c >= '@' && *c <= '~'); c++)
				;
		} else if (*c == '\r') { /* the terminal's ONLCR may double it */
			continue;
		} else if (*c == '\n') {
			KT_CHECK(++n < max);
			lines[n][0] = 0;
			col = 0;
		} else {
			KT_CHECK(col < 1023);
			lines[n][col++] = *c;
			lines[n][col] = 0;
		}
	}
	return n + 1;
}

/* karui-top has ended, with this wait status, and left the terminal as it
 * found it: its last bytes leave the alternate screen and show the cursor. */
static void live_end(int status)
{
	int st;
	KT_WAIT(waitpid(lv.pid, &st, WNOHANG) == lv.pid, kt_nap_us(10000));
	KT_EQ(st, status);
	live_read(0);
	static const char restore[] = "\x1b[?1049l\x1b[?25h";
	KT_CHECK(lv.len >= sizeof restore - 1);
	KT_CHECK(!memcmp(lv.buf + lv.len - (sizeof restore - 1), restore, sizeof restore - 1));
	struct termios after;
	KT_EQ(tcgetattr(lv.slave, &after), 0);
	KT_EQ(after.c_lflag, lv.before.c_lflag);
	KT_EQ(after.c_cc[VMIN], lv.before.c_cc[VMIN]);
	close(lv.master), close(lv.slave);
}

static void send_keys(const char *k)
{
	KT_EQ(write(lv.master, k, strlen(k)), (ssize_t)strlen(k));
}

static void live_view_draws_frames_answers_keys_and_q_restores_the_terminal(void)
{
	char name[96];
	struct kr_carea_seg *g = seg_make("live", name, sizeof name, sizeof *g);
	uint32_t st[2] = {KR_CA_RUNNING, KR_CA_RECOVERING};
	pid_t me = getpid(), parent = getppid();
	slot_live(g, 0, me, start_of(me), "kt-me", st, 2)->grant = 1;
	slot_live(g, 9, parent, start_of(parent), "kt-parent", st, 1)->grant = 3;
	live_start((const char *const[]){"--segment", name, "-d", "0.2", NULL}, 24, 120);
	LIVE_EXPECT("\x1b[?1049h\x1b[?25l");
	LIVE_EXPECT("kt-me");
	static char l[64][1024];
	unsigned n = live_frame(l, 64);
	KT_CHECK(n >= 6);
	fprintf(stderr, "  a frame:\n");
	for (unsigned i = 0; i < n; i++)
		fprintf(stderr, "  | %s\n", l[i]);
	KT_CHECK(strstr(l[0], name) && strstr(l[0], "ncpu 4") && strstr(l[0], "grants 4/4") &&
		 strstr(l[0], "sort pid"));
	KT_CHECK(strstr(l[1], "PID") && strstr(l[1], "SWITCHES/s"));
	/* sorted by pid: the parent's first, as it has the lower pid */
	int first_is_parent = parent < me;
	KT_CHECK(strstr(l[2], first_is_parent ? "kt-parent" : "kt-me"));
	send_keys("s");
	LIVE_EXPECT("sort grant");
	n = live_frame(l, 64);
	KT_CHECK(strstr(l[2], "kt-parent") && strstr(l[2], " live "));
	KT_CHECK(strstr(l[3], "vp 0") && strstr(l[3], "running"));
	KT_CHECK(strstr(l[4], "kt-me"));
	KT_CHECK(strstr(l[6], "vp 1") && strstr(l[6], "recovering"));
	send_keys("h");
	LIVE_EXPECT("h hide this line");
	send_keys("q");
	live_end(0);
}

static void live_view_restores_the_terminal_on_signals(void)
{
	char name[96];
	struct kr_carea_seg *g = seg_make("signal", name, sizeof name, sizeof *g);
	uint32_t st[1] = {KR_CA_RUNNING};
	slot_live(g, 0, getpid(), start_of(getpid()), "kt-sig", st, 1);
	const char *const args[] = {"--segment", name, NULL};
	/* Ctrl-Z: the terminal back, then the view again (the process would
	 * stop there; a group with no parent in its session, as here, does
	 * not stop on SIGTSTP) */
	live_start(args, 24, 80);
	LIVE_EXPECT("kt-sig");
	send_keys("\x1a");
	LIVE_EXPECT("\x1b[?1049l\x1b[?25h");
	LIVE_EXPECT("\x1b[?1049h\x1b[?25l");
	LIVE_EXPECT("kt-sig");
	/* Ctrl-C */
	send_keys("\x03");
	live_end(SIGINT);
	live_start(args, 24, 80);
	LIVE_EXPECT("kt-sig");
	KT_EQ(kill(lv.pid, SIGTERM), 0);
	live_end(SIGTERM);
}

static void live_view_fits_the_window_and_follows_its_resizes(void)
{
	char name[96];
	struct kr_carea_seg *g = seg_make("window", name, sizeof name, sizeof *g);
	uint32_t st[KR_CAREA_VPS];
	for (unsigned i = 0; i < KR_CAREA_VPS; i++)
		st[i] = KR_CA_IDLE;
	slot_live(g, 0, getpid(), start_of(getpid()), "kt-window", st, KR_CAREA_VPS);
	/* -d 60: a frame after the resize is SIGWINCH's, not the refresh's */
	live_start((const char *const[]){"--segment", name, "-d", "60", NULL}, 12, 40);
	static char l[64][1024];
	unsigned n = live_frame(l, 64);
	KT_EQ(n, 12);
	for (unsigned i = 0; i < n; i++)
		KT_CHECK(strlen(l[i]) <= 40);
	KT_EQ(strlen(l[1]), 40); /* the titles are padded to the width */
	KT_CHECK(strstr(l[11], "vp 8"));
	struct winsize ws = {.ws_row = 7, .ws_col = 25};
	KT_EQ(ioctl(lv.master, TIOCSWINSZ, &ws), 0);
	uint64_t asked = kt_mono_ns();
	n = live_frame(l, 64);
	KT_CHECK(kt_mono_ns() - asked < 30 * 1000000000ull);
	KT_EQ(n, 7);
	for (unsigned i = 0; i < n; i++)
		KT_CHECK(strlen(l[i]) <= 25);
	KT_CHECK(strstr(l[6], "vp 3"));
	send_keys("q");
	live_end(0);
}

static void live_view_waits_for_a_missing_segment(void)
{
	char name[96];
	seg_name(name, sizeof name, "late");
	live_start((const char *const[]){"--segment", name, "-d", "0.2", NULL}, 24, 100);
	LIVE_EXPECT("no such segment");
	LIVE_EXPECT("waiting for it");
	struct kr_carea_seg *g = seg_make("late", name, sizeof name, sizeof *g);
	uint32_t st[1] = {KR_CA_BLOCKED};
	slot_live(g, 0, getpid(), start_of(getpid()), "kt-late", st, 1);
	LIVE_EXPECT("kt-late");
	LIVE_EXPECT("blocked");
	send_keys("q");
	live_end(0);
}

static void live_view_sleeps_between_refreshes(void)
{
	char name[96];
	struct kr_carea_seg *g = seg_make("idle", name, sizeof name, sizeof *g);
	uint32_t st[4] = {KR_CA_RUNNING, KR_CA_RUNNING, KR_CA_IDLE, KR_CA_IDLE};
	slot_live(g, 0, getpid(), start_of(getpid()), "kt-idle", st, 4);
	live_start((const char *const[]){"--segment", name, "-d", "0.25", NULL}, 24, 80);
	LIVE_EXPECT("kt-idle");
	long c0 = kt_proc_ticks(lv.pid);
	KT_CHECK(c0 >= 0);
	uint64_t t0 = kt_mono_ns();
	unsigned frames = 0;
	while (kt_mono_ns() - t0 < 2000000000ull) {
		static char l[64][1024];
		live_frame(l, 64);
		frames++;
	}
	double wall_ticks = (double)(kt_mono_ns() - t0) / 1e9 * (double)sysconf(_SC_CLK_TCK);
	long used = kt_proc_ticks(lv.pid) - c0;
	fprintf(stderr, "  %u frames, %ld ticks of CPU in %.0f\n", frames, used, wall_ticks);
	KT_CHECK(frames >= 2);
	KT_CHECK(used < wall_ticks / 10);
	send_keys("q");
	live_end(0);
}

int main(int argc, char **argv)
{
	kt_args(argc, argv);
	main_pid = getpid();
	KT_RUN(once_shows_a_live_process_with_its_values_and_vp_statuses);
	KT_RUN(once_marks_ended_and_reused_pids_dead);
	KT_RUN(once_rates_are_counter_differences_per_second);
	KT_RUN(once_survives_slots_of_random_bytes);
	KT_RUN(once_refuses_another_version_or_size_with_exit_1);
	KT_RUN(once_survives_its_segment_shrinking_under_it);
	KT_RUN(once_on_a_missing_segment_exits_1);
	KT_RUN(the_environment_names_the_segment_and_the_option_wins);
	KT_RUN(bad_usage_exits_2_and_help_exits_0);
	KT_RUN(live_view_draws_frames_answers_keys_and_q_restores_the_terminal);
	KT_RUN(live_view_restores_the_terminal_on_signals);
	KT_RUN(live_view_fits_the_window_and_follows_its_resizes);
	KT_RUN(live_view_waits_for_a_missing_segment);
	KT_RUN(live_view_sleeps_between_refreshes);
	for (size_t i = 0; i < sizeof tags / sizeof tags[0]; i++) {
		char name[96];
		seg_name(name, sizeof name, tags[i]);
		shm_unlink(name);
	}
	return kt_finish();
}
