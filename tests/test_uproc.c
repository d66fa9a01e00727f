/*
 * μprocesses (include/karui/image.h): unmodified programs — Debian's own
 * binaries and tests/uproc_probe.c — run as private images inside this
 * process, each with its own fds, pid, cwd, umask and environment, and
 * each ending alone; malformed programs and interpreters (cut short,
 * headers changed) are refused or end with a status, and never crash
 * the host.  Without Syscall User Dispatch (qemu-user, old kernels) or
 * FSGSBASE every test says "skipped".
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <elf.h>
#include <fcntl.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/xattr.h>

#include "karui.h"
#include "kt.h"

static const char *probe;  /* tests/uproc_probe, next to this program */
static const char *tprobe; /* and uthread_probe */
static const char *fprobe, *fprobe_nopie; /* futex_probe, and not a PIE (NULL: none) */

static void start(unsigned vps)
{
	kr_config c = {.vps = vps};
	KT_EQ(kr_init(&c), 0);
}

static void need_uprocs(void)
{
	kr_uproc *up;
	char *argv[] = {"true", NULL};
	int e = kr_uproc_spawn(&up, "/bin/true", argv, NULL);
	if (e == ENOTSUP)
		KT_SKIP("no Syscall User Dispatch or FSGSBASE here (qemu-user?)");
	KT_EQ(e, 0);
	int st = -1;
	KT_EQ(kr_uproc_wait(up, &st), 0);
	KT_EQ(st, 0);
}

/* The host's fds, but the I/O back end's rings, which a VP sets up when it
 * first does I/O. */
static int host_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	KT_CHECK(d);
	int n = 0;
	for (struct dirent *e; (e = readdir(d));) {
		char path[300], to[256];
		snprintf(path, sizeof path, "/proc/self/fd/%s", e->d_name);
		ssize_t l = readlink(path, to, sizeof to - 1);
		to[l > 0 ? l : 0] = 0;
		n += e->d_name[0] != '.' && !strstr(to, "io_uring");
	}
	closedir(d);
	return n;
}

static long rss_kib(void)
{
	FILE *f = fopen("/proc/self/status", "r");
	KT_CHECK(f);
	char line[256];
	long v = -1;
	while (fgets(line, sizeof line, f))
		if (sscanf(line, "VmRSS: %ld", &v) == 1)
			break;
	fclose(f);
	return v;
}

/* ---- running a program with pipes for stdin and stdout ---- */

struct feed {
	kr_upipe *p;
	const char *data;
	size_t len;
};

static void *feeder(void *arg)
{
	struct feed *f = arg;
	size_t done = 0;
	if (f->len)
		KT_EQ(kr_upipe_write(f->p, f->data, f->len, &done), 0);
	KT_EQ(done, f->len);
	KT_EQ(kr_upipe_close(f->p, KR_UPIPE_WRITE), 0);
	return NULL;
}

/* Run argv as a μprocess with `in` on its stdin; its stdout is collected
 * into a malloc'ed string.  Returns its status; *reused: whether it started
 * from a kept image. */
static int run_r(const char *path, char *const *argv, const char *in, char **out,
		 const kr_uproc_attr *base, int *reused)
{
	kr_upipe *pi, *po;
	KT_EQ(kr_upipe_create(&pi), 0);
	KT_EQ(kr_upipe_create(&po), 0);
	kr_uproc_attr a;
	if (base)
		a = *base;
	else
		KT_EQ(kr_uproc_attr_init(&a), 0);
	KT_EQ(kr_uproc_attr_fd_pipe(&a, 0, pi, KR_UPIPE_READ), 0);
	KT_EQ(kr_uproc_attr_fd_pipe(&a, 1, po, KR_UPIPE_WRITE), 0);
	kr_uproc *up;
	KT_EQ(kr_uproc_spawn(&up, path, argv, &a), 0);
	KT_EQ(kr_upipe_close(pi, KR_UPIPE_READ), 0);
	KT_EQ(kr_upipe_close(po, KR_UPIPE_WRITE), 0);
	struct feed f = {pi, in ? in : "", in ? strlen(in) : 0};
	kr_mp *w;
	KT_EQ(kr_mp_create(&w, NULL, feeder, &f), 0);
	size_t cap = 1 << 16, len = 0, got;
	char *buf = malloc(cap);
	KT_CHECK(buf);
	for (;;) {
		if (len + 4096 > cap)
			KT_CHECK((buf = realloc(buf, cap *= 2)));
		KT_EQ(kr_upipe_read(po, buf + len, cap - len - 1, &got), 0);
		if (!got)
			break;
		len += got;
	}
	buf[len] = 0;
	KT_EQ(kr_upipe_close(po, KR_UPIPE_READ), 0);
	KT_EQ(kr_mp_join(w, NULL), 0);
	int st = -1;
	*reused = kr_uproc_reused(up);
	KT_EQ(kr_uproc_wait(up, &st), 0);
	if (out)
		*out = buf;
	else
		free(buf);
	return st;
}

static int last_reused; /* run's last μprocess started from a kept image */

static int run(const char *path, char *const *argv, const char *in, char **out,
	       const kr_uproc_attr *base)
{
	return run_r(path, argv, in, out, base, &last_reused);
}

static int run_probe(const char *mode, const char *arg, char **out)
{
	char *argv[] = {"uproc_probe", (char *)mode, (char *)arg, NULL};
	return run(probe, argv, NULL, out, NULL);
}

/* uproc_probe MODE ARG exits 0 and prints exactly `want`. */
static void probe_says(const char *mode, const char *arg, const char *want)
{
	char *out;
	KT_EQ(run_probe(mode, arg, &out), 0);
	if (strcmp(out, want))
		fprintf(stderr, "  %s said:\n%s  not:\n%s", mode, out, want);
	KT_CHECK(strcmp(out, want) == 0);
	free(out);
}

/* ---- the tests ---- */

static void cat_copies_its_stdin_pipe_to_its_stdout_pipe(void)
{
	start(2);
	need_uprocs();
	size_t n = 300000;
	char *in = malloc(n + 1);
	for (size_t i = 0; i < n; i++)
		in[i] = (char)('a' + i % 26 + (i % 61 == 60 ? '\n' - 'a' - i % 26 : 0));
	in[n] = 0;
	char *out, *argv[] = {"cat", NULL};
	KT_EQ(run("/bin/cat", argv, in, &out, NULL), 0);
	KT_EQ(strlen(out), n);
	KT_CHECK(memcmp(in, out, n) == 0);
	free(in);
	free(out);
	KT_EQ(kr_fini(), 0);
}

static void exit_status_is_what_a_shell_shows(void)
{
	start(1);
	need_uprocs();
	char *out, *argv[] = {"false", NULL};
	KT_EQ(run("/bin/false", argv, NULL, NULL, NULL), 1);
	KT_EQ(run_probe("exit", "3", &out), 3);
	KT_CHECK(strcmp(out, "before exit\n") == 0); /* exit flushes stdio */
	free(out);
	KT_EQ(run_probe("return", "42", NULL), 42);
	KT_EQ(run_probe("segv", NULL, NULL), 128 + SIGSEGV);
	KT_EQ(run_probe("abort", NULL, NULL), 128 + SIGABRT);
	KT_EQ(run_probe("fpe", NULL, NULL), 128 + SIGFPE);
	KT_EQ(run_probe("ill", NULL, NULL), 128 + SIGILL);
	KT_EQ(kr_fini(), 0);
}

static void *crasher(void *arg)
{
	return (void *)(intptr_t)run_probe(arg, NULL, NULL);
}

/* The domain layer's fault handler, installed over the μprocesses' own
 * (a domain made after the first μprocess), leaves a μprocess's fault to
 * them: it runs on the μprocess's thread pointer and must not read the
 * host's thread-local data there. */
static void a_crash_ends_its_uproc_alone_with_domains_too(void)
{
	start(1);
	need_uprocs();
	KT_EQ(run_probe("return", "0", NULL), 0); /* the μprocesses' handlers */
	kr_domain *d;
	KT_EQ(kr_domain_create(&d, "over"), 0); /* the domains' over them */
	KT_EQ(run_probe("fpe", NULL, NULL), 128 + SIGFPE);
	KT_EQ(run_probe("segv", NULL, NULL), 128 + SIGSEGV);
	KT_EQ(run_probe("ill", NULL, NULL), 128 + SIGILL);
	KT_EQ(kr_domain_destroy(d), 0);
	KT_EQ(kr_fini(), 0);
}

/* A μprocess that crashes while another waits on its stdin: the other
 * one and the host go on. */
static void a_crash_ends_its_uproc_alone(void)
{
	start(2);
	need_uprocs();
	kr_upipe *pi, *po;
	KT_EQ(kr_upipe_create(&pi), 0);
	KT_EQ(kr_upipe_create(&po), 0);
	kr_uproc_attr a;
	KT_EQ(kr_uproc_attr_init(&a), 0);
	KT_EQ(kr_uproc_attr_fd_pipe(&a, 0, pi, KR_UPIPE_READ), 0);
	KT_EQ(kr_uproc_attr_fd_pipe(&a, 1, po, KR_UPIPE_WRITE), 0);
	kr_uproc *cat;
	char *argv[] = {"cat", NULL};
	KT_EQ(kr_uproc_spawn(&cat, "/bin/cat", argv, &a), 0);
	KT_EQ(kr_upipe_close(pi, KR_UPIPE_READ), 0);
	KT_EQ(kr_upipe_close(po, KR_UPIPE_WRITE), 0);
	const char *modes[] = {"segv", "abort", "fpe", "ill"};
	for (int i = 0; i < 4; i++) {
		kr_mp *m;
		void *st;
		KT_EQ(kr_mp_create(&m, NULL, crasher, (void *)modes[i]), 0);
		KT_EQ(kr_mp_join(m, &st), 0);
		KT_CHECK((intptr_t)st > 128);
		/* cat still answers */
		size_t n;
		char b[8];
		KT_EQ(kr_upipe_write(pi, "ping\n", 5, &n), 0);
		KT_EQ(kr_upipe_read(po, b, sizeof b, &n), 0);
		KT_EQ(n, 5);
		KT_CHECK(memcmp(b, "ping\n", 5) == 0);
	}
	KT_EQ(kr_upipe_close(pi, KR_UPIPE_WRITE), 0);
	int st = -1;
	KT_EQ(kr_uproc_wait(cat, &st), 0);
	KT_EQ(st, 0);
	KT_EQ(kr_upipe_close(po, KR_UPIPE_READ), 0);
	KT_EQ(kr_fini(), 0);
}

static void each_uproc_sees_a_pid_of_its_own(void)
{
	start(1);
	need_uprocs();
	char *o1, *o2;
	KT_EQ(run_probe("pid", NULL, &o1), 0);
	KT_EQ(run_probe("pid", NULL, &o2), 0);
	int a, b, c, d;
	KT_EQ(sscanf(o1, "%d %d", &a, &b), 2);
	KT_EQ(sscanf(o2, "%d %d", &c, &d), 2);
	KT_EQ(a, b); /* libc's getpid and the raw call agree */
	KT_EQ(c, d);
	KT_CHECK(a != c);
	KT_CHECK(a != getpid() && c != getpid());
	free(o1);
	free(o2);
	KT_EQ(kr_fini(), 0);
}

static void cwd_umask_and_environment_are_the_uprocs_own(void)
{
	start(1);
	need_uprocs();
	kr_uproc_attr a;
	KT_EQ(kr_uproc_attr_init(&a), 0);
	a.cwd = "/usr/share";
	a.umask = 027;
	char *env[] = {"KARUI_PROBE=seen", "PATH=/bin", NULL};
	a.envp = env;
	char *out;
	char *cwd[] = {"uproc_probe", "cwd", NULL}, *um[] = {"uproc_probe", "umask", NULL},
	     *ev[] = {"uproc_probe", "env", "KARUI_PROBE", NULL};
	KT_EQ(run(probe, cwd, NULL, &out, &a), 0);
	KT_CHECK(strcmp(out, "/usr/share\n") == 0);
	free(out);
	KT_EQ(run(probe, um, NULL, &out, &a), 0);
	KT_CHECK(strcmp(out, "027\n") == 0);
	free(out);
	KT_EQ(run(probe, ev, NULL, &out, &a), 0);
	KT_CHECK(strcmp(out, "seen\n") == 0);
	free(out);
	/* a relative path is the μprocess's: cat in /etc reads /etc/hostname */
	a.cwd = "/etc";
	char *cat[] = {"cat", "hostname", NULL}, *want;
	KT_EQ(run("/bin/cat", cat, NULL, &out, &a), 0);
	FILE *f = fopen("/etc/hostname", "r");
	KT_CHECK(f);
	want = calloc(1, 4096);
	fread(want, 1, 4095, f);
	fclose(f);
	KT_CHECK(strcmp(out, want) == 0);
	free(out);
	free(want);
	char here[4096];
	KT_CHECK(getcwd(here, sizeof here) && strcmp(here, "/etc") != 0); /* the host's stays */
	KT_EQ(kr_fini(), 0);
}

/* What an ended μprocess held goes with it, after any number of runs. */
static void ten_thousand_runs_leave_fd_count_and_rss_flat(void)
{
	start(2);
	need_uprocs();
	int runs = KT_TSAN ? 500 : 10000;
	KT_EQ(run_probe("leak", "20", NULL), 0);
	int fds = host_fds();
	long rss = 0;
	for (int i = 0; i < runs; i++) {
		KT_EQ(run_probe("leak", "4", NULL), 0);
		if (i == runs / 10)
			rss = rss_kib();
		if (i % 1000 == 999)
			fprintf(stderr, "  %d runs, rss %ld KiB\n", i + 1, rss_kib());
	}
	KT_EQ(host_fds(), fds);
	long grown = rss_kib() - rss;
	fprintf(stderr, "  rss grew %ld KiB over the last %d runs\n", grown, runs - runs / 10);
#if !defined(__SANITIZE_ADDRESS__) /* its quarantine keeps freed memory */
	KT_CHECK(grown < 8192);
#endif
	KT_EQ(kr_fini(), 0);
}

/* 1,000 cat μprocesses at once, each blocked reading its own pipe. */
static void a_thousand_cats_wait_on_their_stdin_at_once(void)
{
	start(2);
	need_uprocs();
	enum { N = 1000 };
	static kr_uproc *up[N];
	static kr_upipe *in[N], *out[N];
	char *argv[] = {"cat", NULL};
	for (int i = 0; i < N; i++) {
		KT_EQ(kr_upipe_create(&in[i]), 0);
		KT_EQ(kr_upipe_create(&out[i]), 0);
		kr_uproc_attr a;
		KT_EQ(kr_uproc_attr_init(&a), 0);
		KT_EQ(kr_uproc_attr_fd_pipe(&a, 0, in[i], KR_UPIPE_READ), 0);
		KT_EQ(kr_uproc_attr_fd_pipe(&a, 1, out[i], KR_UPIPE_WRITE), 0);
		KT_EQ(kr_uproc_spawn(&up[i], "/bin/cat", argv, &a), 0);
		KT_EQ(kr_upipe_close(in[i], KR_UPIPE_READ), 0);
		KT_EQ(kr_upipe_close(out[i], KR_UPIPE_WRITE), 0);
	}
	/* every one is alive: each echoes its own number back */
	for (int i = 0; i < N; i++) {
		char msg[16], b[16];
		int l = snprintf(msg, sizeof msg, "%d\n", i);
		size_t n;
		KT_EQ(kr_upipe_write(in[i], msg, (size_t)l, &n), 0);
		KT_EQ(kr_upipe_read(out[i], b, sizeof b, &n), 0);
		KT_EQ(n, (size_t)l);
		KT_CHECK(memcmp(b, msg, n) == 0);
	}
	kr_stats s;
	KT_EQ(kr_stats_get(&s), 0);
	KT_CHECK(s.mps_live >= N);
	for (int i = 0; i < N; i++) {
		KT_EQ(kr_upipe_close(in[i], KR_UPIPE_WRITE), 0);
		int st = -1;
		KT_EQ(kr_uproc_wait(up[i], &st), 0);
		KT_EQ(st, 0);
		KT_EQ(kr_upipe_close(out[i], KR_UPIPE_READ), 0);
	}
	KT_EQ(kr_fini(), 0);
}

static void identity_changes_fail_with_eperm(void)
{
	start(1);
	need_uprocs();
	probe_says("setuid", NULL, "EPERM\n");
	KT_EQ(kr_fini(), 0);
}

/* What a μprocess cannot do yet fails at once, with an errno, not a hang. */

/* More than the 2 MiB of arguments a μprocess's stack has room for:
 * E2BIG, as execve says, and nothing is started. */
static void too_many_arguments_are_refused(void)
{
	start(1);
	need_uprocs();
	enum { N = 3 };
	static char big[N][1 << 20];
	char *argv[N + 2] = {"true"};
	for (int i = 0; i < N; i++) {
		memset(big[i], 'a', sizeof big[i] - 1);
		argv[i + 1] = big[i];
	}
	kr_uproc *up = NULL;
	KT_EQ(kr_uproc_spawn(&up, "/bin/true", argv, NULL), E2BIG);
	argv[2] = NULL; /* 1 MiB fits */
	KT_EQ(kr_uproc_spawn(&up, "/bin/true", argv, NULL), 0);
	int st = -1;
	KT_EQ(kr_uproc_wait(up, &st), 0);
	KT_EQ(st, 0);
	KT_EQ(kr_fini(), 0);
}

static void scripts_and_setuid_programs_are_not_loaded(void)
{
	start(1);
	need_uprocs();
	char dir[] = "/tmp/karui-uproc-XXXXXX", path[128];
	KT_CHECK(mkdtemp(dir));
	snprintf(path, sizeof path, "%s/script", dir);
	FILE *f = fopen(path, "w");
	KT_CHECK(f);
	fputs("#!/bin/sh\necho hi\n", f);
	fclose(f);
	KT_EQ(chmod(path, 0755), 0);
	kr_uproc *up;
	char *argv[] = {"x", NULL};
	KT_EQ(kr_uproc_spawn(&up, path, argv, NULL), ENOEXEC);
	unlink(path);
	/* a setuid copy of true */
	snprintf(path, sizeof path, "%s/suid", dir);
	int in = open("/bin/true", O_RDONLY), outfd = open(path, O_WRONLY | O_CREAT, 0755);
	KT_CHECK(in >= 0 && outfd >= 0);
	char b[65536];
	ssize_t n;
	while ((n = read(in, b, sizeof b)) > 0)
		KT_EQ(write(outfd, b, (size_t)n), n);
	close(in);
	close(outfd);
	KT_EQ(chmod(path, 04755), 0);
	KT_EQ(kr_uproc_spawn(&up, path, argv, NULL), EPERM);
	unlink(path);
	KT_EQ(kr_uproc_spawn(&up, "/nonexistent/x", argv, NULL), ENOENT);
	KT_EQ(kr_uproc_spawn(&up, "/etc/passwd", argv, NULL), EACCES); /* no x bit */
	rmdir(dir);
	KT_EQ(kr_fini(), 0);
}

/* A program with file capabilities is refused (EPERM) as a setuid one
 * is, even when an image of it was kept before it got them: only the
 * kernel's exec grants them, so it runs as a child process. */
static void a_program_with_file_capabilities_is_not_loaded(void)
{
	start(1);
	need_uprocs();
	char path[] = "/tmp/karui-caps-XXXXXX";
	int in = open("/bin/true", O_RDONLY), outfd = mkstemp(path);
	KT_CHECK(in >= 0 && outfd >= 0);
	char b[65536];
	ssize_t n;
	while ((n = read(in, b, sizeof b)) > 0)
		KT_EQ(write(outfd, b, (size_t)n), n);
	close(in);
	KT_EQ(fchmod(outfd, 0755), 0);
	close(outfd);
	char *argv[] = {"true", NULL};
	for (int i = 0; i < 2; i++)
		KT_EQ(run(path, argv, NULL, NULL, NULL), 0);
	KT_CHECK(last_reused); /* an image of it is kept */
	/* CAP_NET_RAW permitted and effective: struct vfs_cap_data, v2 */
	uint32_t caps[5] = {0x02000000 | 1, 1u << 13, 0, 0, 0};
	if (setxattr(path, "security.capability", caps, sizeof caps, 0)) {
		unlink(path);
		KT_SKIP("cannot set file capabilities here (not root, or no xattrs)");
	}
	kr_uproc *up;
	KT_EQ(kr_uproc_spawn(&up, path, argv, NULL), EPERM);
	unlink(path);
	KT_EQ(kr_fini(), 0);
}

/* /dev/stdin, /dev/stdout, /dev/fd/N and /proc/self/fd/N name the
 * μprocess's own fds: its karui pipes, or its host files opened anew. */
static void dev_stdin_and_proc_self_fd_name_its_own_fds(void)
{
	start(2);
	need_uprocs();
	const char *names[] = {"/dev/stdin", "/dev/fd/0", "/proc/self/fd/0"};
	for (int i = 0; i < 3; i++) {
		char *out, *argv[] = {"cat", (char *)names[i], NULL};
		KT_EQ(run("/bin/cat", argv, "hello\n", &out, NULL), 0);
		KT_CHECK(strcmp(out, "hello\n") == 0);
		free(out);
	}
	char *out, *tee[] = {"tee", "/dev/stdout", NULL};
	KT_EQ(run("/usr/bin/tee", tee, "twice\n", &out, NULL), 0);
	KT_CHECK(strcmp(out, "twice\ntwice\n") == 0);
	free(out);
	char *bad[] = {"cat", "/dev/fd/7", NULL}; /* not open: as natively */
	KT_EQ(run("/bin/cat", bad, "", &out, NULL), 1);
	free(out);
	/* a host file as fd 3, read to its end: opened anew from its start */
	kr_uproc_attr a;
	KT_EQ(kr_uproc_attr_init(&a), 0);
	int fd = open("/etc/passwd", O_RDONLY);
	KT_CHECK(fd >= 0);
	struct stat st;
	KT_EQ(fstat(fd, &st), 0);
	KT_EQ(lseek(fd, 0, SEEK_END), st.st_size);
	KT_EQ(kr_uproc_attr_fd_host(&a, 3, fd), 0);
	char *wc[] = {"wc", "-c", "/dev/fd/3", NULL}, want[64];
	snprintf(want, sizeof want, "%lld /dev/fd/3\n", (long long)st.st_size);
	KT_EQ(run("/usr/bin/wc", wc, NULL, &out, &a), 0);
	KT_CHECK(strcmp(out, want) == 0);
	free(out);
	close(fd);
	KT_EQ(kr_fini(), 0);
}

/* A writer whose reader has gone ends by SIGPIPE, as `yes | head -1`
 * needs. */
static void writing_to_a_pipe_without_readers_ends_by_sigpipe(void)
{
	start(1);
	need_uprocs();
	kr_upipe *po;
	KT_EQ(kr_upipe_create(&po), 0);
	kr_uproc_attr a;
	KT_EQ(kr_uproc_attr_init(&a), 0);
	KT_EQ(kr_uproc_attr_fd_pipe(&a, 1, po, KR_UPIPE_WRITE), 0);
	kr_uproc *up;
	char *argv[] = {"uproc_probe", "write-after-close", NULL};
	KT_EQ(kr_uproc_spawn(&up, probe, argv, &a), 0);
	KT_EQ(kr_upipe_close(po, KR_UPIPE_WRITE), 0);
	char b[16];
	size_t n;
	KT_EQ(kr_upipe_read(po, b, sizeof b, &n), 0);
	KT_CHECK(n > 0 && b[0] == 'y');
	KT_EQ(kr_upipe_close(po, KR_UPIPE_READ), 0);
	int st = -1;
	KT_EQ(kr_uproc_wait(up, &st), 0);
	KT_EQ(st, 128 + SIGPIPE);
	KT_EQ(kr_fini(), 0);
}

/* Two μprocesses joined by a karui pipe, as `sort | uniq -c` */
static void a_pipeline_of_two_uprocs_gives_what_the_programs_give(void)
{
	start(2);
	need_uprocs();
	kr_upipe *pi, *mid, *po;
	KT_EQ(kr_upipe_create(&pi), 0);
	KT_EQ(kr_upipe_create(&mid), 0);
	KT_EQ(kr_upipe_create(&po), 0);
	kr_uproc_attr a, b;
	KT_EQ(kr_uproc_attr_init(&a), 0);
	KT_EQ(kr_uproc_attr_init(&b), 0);
	KT_EQ(kr_uproc_attr_fd_pipe(&a, 0, pi, KR_UPIPE_READ), 0);
	KT_EQ(kr_uproc_attr_fd_pipe(&a, 1, mid, KR_UPIPE_WRITE), 0);
	KT_EQ(kr_uproc_attr_fd_pipe(&b, 0, mid, KR_UPIPE_READ), 0);
	KT_EQ(kr_uproc_attr_fd_pipe(&b, 1, po, KR_UPIPE_WRITE), 0);
	kr_uproc *s, *u;
	char *sort[] = {"sort", NULL}, *uniq[] = {"uniq", "-c", NULL};
	KT_EQ(kr_uproc_spawn(&s, "/usr/bin/sort", sort, &a), 0);
	KT_EQ(kr_uproc_spawn(&u, "/usr/bin/uniq", uniq, &b), 0);
	KT_EQ(kr_upipe_close(pi, KR_UPIPE_READ), 0);
	KT_EQ(kr_upipe_close(mid, KR_UPIPE_READ), 0);
	KT_EQ(kr_upipe_close(mid, KR_UPIPE_WRITE), 0);
	KT_EQ(kr_upipe_close(po, KR_UPIPE_WRITE), 0);
	size_t n;
	const char *text = "b\na\nb\nc\nb\na\n";
	KT_EQ(kr_upipe_write(pi, text, strlen(text), &n), 0);
	KT_EQ(kr_upipe_close(pi, KR_UPIPE_WRITE), 0);
	char out[256];
	size_t len = 0;
	do {
		KT_EQ(kr_upipe_read(po, out + len, sizeof out - 1 - len, &n), 0);
		len += n;
	} while (n);
	out[len] = 0;
	KT_CHECK(strcmp(out, "      2 a\n      3 b\n      1 c\n") == 0);
	int st1 = -1, st2 = -1;
	KT_EQ(kr_uproc_wait(s, &st1), 0);
	KT_EQ(kr_uproc_wait(u, &st2), 0);
	KT_EQ(st1, 0);
	KT_EQ(st2, 0);
	KT_EQ(kr_upipe_close(po, KR_UPIPE_READ), 0);
	KT_EQ(kr_fini(), 0);
}

/* A site that has trapped twice enters karui by a jump from then on, and
 * keeps what the syscall instruction keeps, on both of its paths. */
static void hot_call_sites_are_rewritten_and_keep_every_register(void)
{
	start(1);
	need_uprocs();
	probe_says("regs", "getpid", "kept rewritten\n");
	probe_says("regs", "umask", "kept rewritten\n");
	/* a site whose flags are dead after it: the path that keeps no flags */
	probe_says("regs-nf", "getpid", "kept rewritten\n");
	probe_says("regs-nf", "umask", "kept rewritten\n");
	KT_EQ(kr_fini(), 0);
}

/* A site whose rewrite would copy its page into the μprocess is
 * rewritten at its third trap, not its second (as where the page is its
 * own copy already): a site called twice at start-up is not worth 4 KiB
 * of every μprocess. */
static void a_site_that_would_cost_a_page_is_rewritten_at_its_third_trap(void)
{
	start(1);
	need_uprocs();
	KT_EQ(kr_uproc_keep(0), 0); /* each run loaded afresh */
	probe_says("site", "2", "trapping\n");
	probe_says("site", "3", "rewritten\n");
	KT_EQ(kr_uproc_keep(8), 0);
	KT_EQ(kr_fini(), 0);
}

/* A site rewritten in one μprocess is rewritten in the next μprocess of
 * the same program at the site's first trap, where the page that holds it
 * is that μprocess's own copy already (site-own: another site there made
 * hot first): after its first call, where a site nobody knew is still
 * trapping.  In a page of the file's, a site called once stays as it is
 * (site): rewriting it would cost the μprocess a page for one trap. */
static void sites_hot_in_one_uproc_are_rewritten_in_the_next_at_once(void)
{
	start(1);
	need_uprocs();
	KT_EQ(kr_uproc_keep(0), 0); /* each run loaded afresh */
	probe_says("site-own", NULL, "trapping\n"); /* one trap: not hot yet */
	probe_says("regs", "getpid", "kept rewritten\n");
	probe_says("site", NULL, "trapping\n");
	probe_says("site-own", NULL, "rewritten\n");
	KT_EQ(kr_uproc_keep(8), 0);
	KT_EQ(kr_fini(), 0);
}

/* KiB of Private_Dirty in the host's executable mappings of files whose
 * name starts with `name` (smaps): the code pages that are copies of
 * the host's own, changed. */
static long code_dirty(const char *name)
{
	FILE *f = fopen("/proc/self/smaps", "r");
	KT_CHECK(f);
	char line[512];
	int in = 0;
	long kib = 0, v;
	while (fgets(line, sizeof line, f)) {
		char perm[8];
		int at = 0;
		if (sscanf(line, "%*x-%*x %7s %*s %*s %*s %n", perm, &at) == 1 && at) {
			const char *path = line + at, *b = strrchr(path, '/');
			in = perm[2] == 'x' && b && !strncmp(b + 1, name, strlen(name));
		} else if (in && sscanf(line, "Private_Dirty: %ld", &v) == 1) {
			kib += v;
		}
	}
	fclose(f);
	return kib;
}

/* The host's executable mappings of no file: karui's trampoline pages. */
static int tramp_pages(void)
{
	FILE *f = fopen("/proc/self/maps", "r");
	KT_CHECK(f);
	char line[512];
	int n = 0;
	while (fgets(line, sizeof line, f)) {
		char perm[8];
		int at = 0;
		if (sscanf(line, "%*x-%*x %7s %*s %*s %*s %n", perm, &at) == 1 && at)
			n += perm[2] == 'x' && (!line[at] || line[at] == '\n');
	}
	fclose(f);
	return n;
}

/* uproc_probe sig ign 10 on two pipes, once it has said "ready": the
 * private pages that ld.so's code in the host gained meanwhile, KiB. */
static kr_uproc *ready_probe(kr_upipe **in, kr_upipe **out, long *ldso)
{
	long ldso0 = code_dirty("ld-linux");
	KT_EQ(kr_upipe_create(in), 0);
	KT_EQ(kr_upipe_create(out), 0);
	kr_uproc_attr at;
	kr_uproc_attr_init(&at);
	kr_uproc_attr_fd_pipe(&at, 0, *in, KR_UPIPE_READ);
	kr_uproc_attr_fd_pipe(&at, 1, *out, KR_UPIPE_WRITE);
	char *argv[] = {"uproc_probe", "sig", "ign", "10", NULL};
	kr_uproc *up;
	KT_EQ(kr_uproc_spawn(&up, probe, argv, &at), 0);
	kr_upipe_close(*in, KR_UPIPE_READ);
	kr_upipe_close(*out, KR_UPIPE_WRITE);
	char b[16];
	size_t n = 0, got = 1;
	while (n < 6 && got && !kr_upipe_read(*out, b + n, 6 - n, &got))
		n += got;
	KT_CHECK(n == 6 && !memcmp(b, "ready\n", 6));
	*ldso = code_dirty("ld-linux") - ldso0;
	return up;
}

/* The code pages karui patches in a μprocess are copies of its own (copy
 * on write), 4 KiB each.  Once ld.so has handed over to the program, the
 * pages of it karui patched (37 cpuid sites, its hot mmap, openat, read,
 * ...) are the file's again: the probe's ld.so holds no private page
 * while it waits, and then binds its symbols lazily (ld.so's code again)
 * as it echoes lines.  No site of its own was hot before (none called
 * three times), so no trampoline page is left either; its read and write
 * get hot as it echoes, and one is mapped again.  With no image kept,
 * then with the image taken at the handover. */
static void ld_sos_patched_pages_are_the_files_again_once_it_hands_over(void)
{
	start(1);
	need_uprocs();
	for (unsigned keep = 0; keep <= 8; keep += 8) {
		KT_EQ(kr_uproc_keep(0), 0); /* none kept: loaded afresh */
		KT_EQ(kr_uproc_keep(keep), 0);
		kr_upipe *in, *o;
		long ldso;
		int tramps = tramp_pages();
		kr_uproc *up = ready_probe(&in, &o, &ldso);
		KT_EQ(ldso, 0);
		KT_EQ(tramp_pages(), tramps);
		size_t n;
		char b[16];
		for (int i = 0; i < 3; i++) {
			KT_EQ(kr_upipe_write(in, "x\n", 2, &n), 0);
			size_t got = 0;
			while (got < 6 && !kr_upipe_read(o, b + got, 6 - got, &n) && n)
				got += n;
			KT_CHECK(got == 6 && !memcmp(b, "got x\n", 6));
		}
		KT_EQ(tramp_pages(), tramps + 1);
		kr_upipe_close(in, KR_UPIPE_WRITE);
		kr_upipe_close(o, KR_UPIPE_READ);
		int st = -1;
		KT_EQ(kr_uproc_wait(up, &st), 0);
		KT_EQ(st, 0);
	}
	KT_EQ(kr_fini(), 0);
}

/* KiB of Private_Dirty in a process's [stack] (smaps). */
static long stack_dirty(pid_t pid)
{
	char path[64], line[512];
	snprintf(path, sizeof path, "/proc/%d/smaps", (int)pid);
	FILE *f = fopen(path, "r");
	KT_CHECK(f);
	int in = 0;
	long kib = 0, v;
	while (fgets(line, sizeof line, f)) {
		int at = 0;
		if (sscanf(line, "%*x-%*x %*s %*s %*s %*s %n", &at) >= 0 && at)
			in = !strncmp(line + at, "[stack]", 7);
		else if (in && sscanf(line, "Private_Dirty: %ld", &v) == 1)
			kib += v;
	}
	fclose(f);
	return kib;
}

/* This process's mappings, from /proc/self/maps: [lo, hi) pairs into m[],
 * anonymous ones only if anon; how many. */
static int maps_of(uintptr_t (*m)[2], int max, int anon)
{
	FILE *f = fopen("/proc/self/maps", "r");
	KT_CHECK(f);
	char line[512];
	int n = 0;
	while (fgets(line, sizeof line, f)) {
		unsigned long lo, hi;
		int at = 0;
		if (sscanf(line, "%lx-%lx %*s %*s %*s %*s %n", &lo, &hi, &at) == 2 && at &&
		    (!anon || !line[at]) && n < max) {
			m[n][0] = lo;
			m[n++][1] = hi;
		}
	}
	fclose(f);
	return n;
}

/* KiB of the pages present and mapped here alone (pagemap) in the parts
 * of this process's anonymous mappings of 8 MiB or more that none of
 * old[0..nold) covered: a μprocess's stack, made since (the kernel may
 * have merged it with an old neighbour). */
static long new_stack_kib(uintptr_t (*old)[2], int nold)
{
	static uintptr_t now[4096][2];
	int n = maps_of(now, 4096, 1), fd = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
	KT_CHECK(fd >= 0);
	long kib = 0;
	for (int i = 0; i < n; i++) {
		if (now[i][1] - now[i][0] < (8ul << 20))
			continue;
		for (uintptr_t a = now[i][0]; a < now[i][1]; a += 4096) {
			int was = 0;
			for (int j = 0; j < nold && !was; j++)
				was = a >= old[j][0] && a < old[j][1];
			uint64_t e = 0;
			if (!was && pread(fd, &e, 8, (off_t)(a / 4096 * 8)) == 8 && (e >> 63) &&
			    (e >> 56 & 1))
				kib += 4;
		}
	}
	close(fd);
	return kib;
}

/* Run fn in a child process (a fresh karui); its exit status.  A child
 * that skipped skips the test. */
static int in_child(void (*fn)(void))
{
	fflush(NULL);
	pid_t pid = fork();
	if (pid == 0) {
		fn();
		_exit(0);
	}
	int st = -1;
	KT_CHECK(pid > 0 && waitpid(pid, &st, 0) == pid);
	if (WIFEXITED(st) && WEXITSTATUS(st) == KT_SKIP_CODE)
		KT_SKIP("the child process skipped");
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static char cache_dir[64];

/* The names of the records in cache_dir, one line each, sorted; how many. */
static int records(char *out, size_t n)
{
	char cmd[128];
	snprintf(cmd, sizeof cmd, "ls %s", cache_dir);
	FILE *f = popen(cmd, "r");
	KT_CHECK(f);
	size_t len = fread(out, 1, n - 1, f);
	out[len] = 0;
	pclose(f);
	int lines = 0;
	for (char *p = out; (p = strchr(p, '\n')); p++)
		lines++;
	return lines;
}

static const char *child_says[3]; /* probe_child's mode, argument, output */

static void probe_child(void)
{
	start(1);
	need_uprocs();
	probe_says(child_says[0], child_says[1], child_says[2]);
	KT_EQ(kr_fini(), 0);
}

/* In a child process with a karui of its own, uproc_probe MODE ARG says
 * `want`: 0, or the child's status. */
static int child_probe_says(const char *mode, const char *arg, const char *want)
{
	child_says[0] = mode;
	child_says[1] = arg;
	child_says[2] = want;
	return in_child(probe_child);
}

static char cpu_file[96];

/* What the probe's C library learnt from cpuid, into cpu_file, or checked
 * against it when it exists. */
static void cpu_says(void)
{
	start(1);
	need_uprocs();
	char *out, was[256] = "";
	KT_EQ(run_probe("cpu", NULL, &out), 0);
	KT_EQ(kr_fini(), 0);
	FILE *f = fopen(cpu_file, "r");
	if (f) {
		KT_CHECK(fgets(was, sizeof was, f));
		fclose(f);
		KT_CHECK(strcmp(was, out) == 0);
	} else {
		KT_CHECK((f = fopen(cpu_file, "w")) && fputs(out, f) >= 0 && fclose(f) == 0);
	}
	free(out);
}

/* Write each sites-* record of cache_dir again with its payload turned to
 * offsets of bytes that are no system call (its header, key and length
 * kept), or cut one byte short. */
static void spoil_sites(int cut)
{
	char names[4096], path[256];
	records(names, sizeof names);
	for (char *line = strtok(names, "\n"); line; line = strtok(NULL, "\n")) {
		if (strncmp(line, "sites-", 6))
			continue;
		snprintf(path, sizeof path, "%s/%s", cache_dir, line);
		FILE *f = fopen(path, "r+");
		KT_CHECK(f);
		KT_EQ(fseek(f, 0, SEEK_END), 0);
		long size = ftell(f);
		KT_CHECK(size > 40);
		if (cut) {
			KT_EQ(ftruncate(fileno(f), size - 1), 0);
		} else {
			KT_EQ(fseek(f, 40, SEEK_SET), 0); /* the header's 40 bytes */
			for (long at = 40; at + 4 <= size; at += 4) {
				uint32_t off = (uint32_t)(at * 7 + 1); /* inside the ELF header */
				KT_EQ(fwrite(&off, 4, 1, f), 1);
			}
		}
		KT_EQ(fclose(f), 0);
	}
}

/* What a process learns of its programs (the call sites that got hot,
 * ld.so's cpuid plan, the processor's cpuid answers) is kept in the cache
 * directory for the processes after it: there a site that was hot in an
 * earlier process is rewritten at its first trap (in a page of the
 * μprocess's own: site-own), and a program
 * learns what the processor says.  Records that are not whole, or that
 * name sites holding no system call, are not believed: the sites trap
 * as if nothing had been learnt, and the programs run as before. */
static void uprocs_here(void)
{
	start(1);
	need_uprocs();
	KT_EQ(kr_fini(), 0);
}

static void a_later_process_starts_from_what_an_earlier_one_learnt(void)
{
	KT_EQ(in_child(uprocs_here), 0); /* or skipped, with nothing made */
	strcpy(cache_dir, "/tmp/karui-test-cache-XXXXXX");
	KT_CHECK(mkdtemp(cache_dir));
	char sub[96], names[4096];
	snprintf(sub, sizeof sub, "%s/karui", cache_dir); /* made at the first write */
	KT_EQ(setenv("KARUI_CACHE_DIR", sub, 1), 0);
	/* without a record, the site traps at its first call */
	KT_EQ(child_probe_says("site-own", NULL, "trapping\n"), 0);
	char cmd[160];
	snprintf(cmd, sizeof cmd, "rm -rf %s", sub);
	KT_EQ(system(cmd), 0);
	KT_EQ(child_probe_says("regs", "getpid", "kept rewritten\n"), 0);
	strcpy(cache_dir, sub);
	KT_CHECK(records(names, sizeof names) >= 3);
	KT_CHECK(strstr(names, "cpuid\n"));
	KT_CHECK(strstr(names, "plan-"));
	KT_CHECK(strstr(names, "sites-"));
	KT_CHECK(!strstr(names, "XXXXXX") && !strchr(names, '.')); /* no temporary left */
	KT_EQ(child_probe_says("site-own", NULL, "rewritten\n"), 0);
	/* cpuid answers from the record are the processor's: what the
	 * probe learns with no record, then with it */
	snprintf(cpu_file, sizeof cpu_file, "%.80s.cpu", sub);
	KT_EQ(setenv("KARUI_CACHE_DIR", "", 1), 0);
	KT_EQ(in_child(cpu_says), 0);
	KT_EQ(setenv("KARUI_CACHE_DIR", sub, 1), 0);
	KT_EQ(in_child(cpu_says), 0);
	KT_EQ(unlink(cpu_file), 0);
	/* a record that names no system call, then one cut short */
	spoil_sites(0);
	KT_EQ(child_probe_says("site-own", NULL, "trapping\n"), 0);
	KT_EQ(child_probe_says("regs", "getpid", "kept rewritten\n"), 0); /* learnt again, written whole */
	KT_EQ(child_probe_says("site-own", NULL, "rewritten\n"), 0);
	spoil_sites(1);
	KT_EQ(child_probe_says("site-own", NULL, "trapping\n"), 0);
	snprintf(cmd, sizeof cmd, "rm -rf %s", sub);
	KT_EQ(system(cmd), 0);
	*strrchr(sub, '/') = 0;
	KT_EQ(rmdir(sub), 0);
}

/* In the child of a fork, after the parent ran μprocesses: a μprocess's
 * exit ends that μprocess, not the child (the child's thread is armed
 * afresh: the kernel keeps no Syscall User Dispatch across fork). */
static void uproc_exits_alone(void)
{
	start(1);
	int st = run_probe("exit", "3", NULL);
	KT_EQ(kr_fini(), 0);
	_exit(st == 3 ? 42 : 1);
}

static void a_child_of_fork_runs_uprocs_of_its_own(void)
{
	start(1);
	need_uprocs();
	KT_EQ(run_probe("exit", "3", NULL), 3);
	KT_EQ(kr_fini(), 0);
	KT_EQ(in_child(uproc_exits_alone), 42);
	/* and the parent goes on as before */
	start(1);
	KT_EQ(run_probe("exit", "3", NULL), 3);
	KT_EQ(kr_fini(), 0);
}

/* A fork's child rewrites sites in its own memory: the kept image it got
 * from its parent (where site-own's site trapped once) has that site
 * rewritten at its second trap in the child, and the parent's image is
 * left as it was (rewritten at its second trap there too).  The
 * /proc/self/mem that karui writes code through names the memory of the
 * process that opened it. */
static void site_own_rewritten(void)
{
	start(1);
	probe_says("site-own", NULL, "rewritten\n");
	KT_EQ(kr_fini(), 0);
}

static void a_fork_childs_rewrites_land_in_its_own_memory(void)
{
	start(1);
	need_uprocs();
	KT_EQ(kr_uproc_keep(0), 0);
	KT_EQ(kr_uproc_keep(8), 0);
	probe_says("site-own", NULL, "trapping\n");
	KT_EQ(kr_fini(), 0);
	KT_EQ(in_child(site_own_rewritten), 0);
	site_own_rewritten();
}

static void with_rewriting_off_every_call_traps(void)
{
	setenv("KARUI_UPROC_REWRITE", "0", 1);
	start(1);
	need_uprocs();
	probe_says("regs", "getpid", "kept trapping\n");
	KT_EQ(kr_fini(), 0);
}

/* `prog mode` (a uproc_probe) prints the same line, and exits 0, run
 * natively as a process and `runs` times as a μprocess (the first run
 * cold, the later ones from what the first left: a kept image, tables).
 * Returns the line, for the caller's own checks. */
static const char *same_as_native(const char *prog, const char *mode, int runs)
{
	static char native[256];
	char cmd[4200];
	snprintf(cmd, sizeof cmd, "%s %s", prog, mode);
	FILE *f = popen(cmd, "r");
	KT_CHECK(f);
	KT_CHECK(fgets(native, sizeof native, f));
	KT_EQ(pclose(f), 0);
	for (int i = 0; i < runs; i++) {
		char *out, *argv[] = {"uproc_probe", (char *)mode, NULL};
		KT_EQ(run(prog, argv, NULL, &out, NULL), 0);
		KT_CHECK(strcmp(out, native) == 0);
		free(out);
	}
	return native;
}

/* karui answers the cpuid instructions of a μprocess's ld.so (and of a
 * static program) from its table: the program learns what a process
 * learns. */
static void cpuid_answers_are_the_processors(void)
{
	start(2);
	need_uprocs();
	char stat_[4200];
	snprintf(stat_, sizeof stat_, "%s-static", probe);
	const char *progs[] = {probe, stat_};
	for (int k = 0; k < 2; k++)
		if (!access(progs[k], X_OK)) /* the first fills the table, the others read it */
			same_as_native(progs[k], "cpu", 3);
	KT_EQ(kr_fini(), 0);
}

/* cat | wc -c over a karui pipe, on two VPs, many times: the stages wait
 * in trapped calls and go on on the other VP, while their ld.so's
 * faults (cpuid) run on the VPs' alternate stacks; each VP must keep its
 * own alternate stack and signal mask through the μprocesses' returns. */
static void pipelines_on_two_vps_keep_each_vps_signal_state(void)
{
	start(2);
	need_uprocs();
	/* the alternate stack each VP thread is seen with: never changes, and
	 * no two share one (this microprocess runs on either VP) */
	struct {
		pid_t tid;
		void *sp;
	} seen[2] = {{0, 0}, {0, 0}};
	for (int r = 0; r < (KT_TSAN ? 20 : 200); r++) {
		stack_t ss;
		KT_EQ(sigaltstack(NULL, &ss), 0);
		pid_t tid = gettid();
		int k = seen[0].tid == tid ? 0 : seen[1].tid == tid ? 1 : !seen[0].tid ? 0 : 1;
		if (!seen[k].tid)
			seen[k].tid = tid, seen[k].sp = ss.ss_sp;
		KT_EQ(seen[k].tid, tid);
		KT_CHECK(seen[k].sp == ss.ss_sp);
		KT_CHECK(!seen[!k].tid || seen[!k].sp != ss.ss_sp);
		kr_upipe *mid, *po;
		KT_EQ(kr_upipe_create(&mid), 0);
		KT_EQ(kr_upipe_create(&po), 0);
		kr_uproc_attr a, b;
		KT_EQ(kr_uproc_attr_init(&a), 0);
		KT_EQ(kr_uproc_attr_init(&b), 0);
		KT_EQ(kr_uproc_attr_fd_pipe(&a, 1, mid, KR_UPIPE_WRITE), 0);
		KT_EQ(kr_uproc_attr_fd_pipe(&b, 0, mid, KR_UPIPE_READ), 0);
		KT_EQ(kr_uproc_attr_fd_pipe(&b, 1, po, KR_UPIPE_WRITE), 0);
		kr_uproc *c, *w;
		char *cat[] = {"cat", (char *)probe, (char *)probe, NULL}, *wc[] = {"wc", "-c", NULL};
		KT_EQ(kr_uproc_spawn(&c, "/bin/cat", cat, &a), 0);
		KT_EQ(kr_uproc_spawn(&w, "/usr/bin/wc", wc, &b), 0);
		KT_EQ(kr_upipe_close(mid, KR_UPIPE_READ), 0);
		KT_EQ(kr_upipe_close(mid, KR_UPIPE_WRITE), 0);
		KT_EQ(kr_upipe_close(po, KR_UPIPE_WRITE), 0);
		char out[64];
		size_t len = 0, n;
		do {
			KT_EQ(kr_upipe_read(po, out + len, sizeof out - 1 - len, &n), 0);
			len += n;
		} while (n);
		out[len] = 0;
		KT_EQ(kr_upipe_close(po, KR_UPIPE_READ), 0);
		int s1 = -1, s2 = -1;
		KT_EQ(kr_uproc_wait(c, &s1), 0);
		KT_EQ(kr_uproc_wait(w, &s2), 0);
		KT_EQ(s1, 0);
		KT_EQ(s2, 0);
		struct stat st;
		KT_EQ(stat(probe, &st), 0);
		KT_EQ(atol(out), 2 * st.st_size);
	}
	KT_EQ(kr_fini(), 0);
}

/* cat ARGS as a μprocess whose fd `fd` is the host's `hostfd`. */
static kr_uproc *spawn_cat_on(int fd, int hostfd, char **argv)
{
	kr_uproc_attr a;
	KT_EQ(kr_uproc_attr_init(&a), 0);
	KT_EQ(kr_uproc_attr_fd_host(&a, fd, hostfd), 0);
	kr_uproc *up;
	KT_EQ(kr_uproc_spawn(&up, "/bin/cat", argv, &a), 0);
	return up;
}

/* A μprocess writing to a host pipe leaves the pipe as it was: on the
 * epoll back end (which makes the fds it waits on O_NONBLOCK) too, since
 * the open file is the host's, and perhaps other processes'. */
static void a_host_pipe_keeps_its_blocking_mode_on_both_back_ends(void)
{
	const char *backends[] = {"io_uring", "epoll"};
	for (int k = 0; k < 2; k++) {
		setenv("KARUI_IO", backends[k], 1);
		start(2);
		need_uprocs();
		int p[2];
		KT_EQ(pipe2(p, O_CLOEXEC), 0);
		char *argv[] = {"cat", "/etc/hostname", NULL};
		kr_uproc *up = spawn_cat_on(1, p[1], argv);
		int st = -1;
		KT_EQ(kr_uproc_wait(up, &st), 0);
		KT_EQ(st, 0);
		KT_EQ(fcntl(p[1], F_GETFL) & O_NONBLOCK, 0);
		char b[256];
		KT_CHECK(read(p[0], b, sizeof b) > 0);
		close(p[0]);
		close(p[1]);
		KT_EQ(kr_fini(), 0);
	}
}

/* A thread starts with its creator's %gs base, which on a VP that ran a
 * μprocess points at karui's record of that VP.  A spare VP started from
 * such a VP (here by kr_blocking_begin while this VP is held in a kernel
 * read) runs μprocesses as well as any. */
static void a_vp_started_by_an_armed_vp_runs_uprocs(void)
{
	start(1);
	need_uprocs(); /* one VP: this thread is armed now */
	for (int round = 0; round < 3; round++) {
		int p[2];
		KT_EQ(pipe2(p, O_CLOEXEC), 0);
		char *argv[] = {"cat", (char *)probe, NULL};
		kr_uproc *up = spawn_cat_on(1, p[1], argv);
		close(p[1]);
		/* this VP stays in the kernel until cat has ended: cat runs on
		 * the spare VP that kr_blocking_begin started or resumed */
		KT_EQ(kr_blocking_begin(), 0);
		char b[4096];
		ssize_t n;
		size_t got = 0;
		while ((n = read(p[0], b, sizeof b)) > 0)
			got += (size_t)n;
		KT_EQ(kr_blocking_end(), 0);
		close(p[0]);
		int st = -1;
		KT_EQ(kr_uproc_wait(up, &st), 0);
		KT_EQ(st, 0);
		struct stat sb;
		KT_EQ(stat(probe, &sb), 0);
		KT_EQ(got, (size_t)sb.st_size);
	}
	KT_EQ(kr_fini(), 0);
}

/* A μprocess with karui pipes for its stdin and stdout; the caller holds
 * their other ends. */
static kr_uproc *spawn_piped(const char *path, char **argv, kr_upipe **in, kr_upipe **out)
{
	KT_EQ(kr_upipe_create(in), 0);
	KT_EQ(kr_upipe_create(out), 0);
	kr_uproc_attr a;
	KT_EQ(kr_uproc_attr_init(&a), 0);
	KT_EQ(kr_uproc_attr_fd_pipe(&a, 0, *in, KR_UPIPE_READ), 0);
	KT_EQ(kr_uproc_attr_fd_pipe(&a, 1, *out, KR_UPIPE_WRITE), 0);
	kr_uproc *up;
	KT_EQ(kr_uproc_spawn(&up, path, argv, &a), 0);
	KT_EQ(kr_upipe_close(*in, KR_UPIPE_READ), 0);
	KT_EQ(kr_upipe_close(*out, KR_UPIPE_WRITE), 0);
	return up;
}

/* The next line from p, without its newline ("" at end of file). */
static const char *line_of(kr_upipe *p)
{
	static char b[256];
	size_t n = 0, got;
	while (n < sizeof b - 1) {
		KT_EQ(kr_upipe_read(p, b + n, 1, &got), 0);
		if (!got || b[n] == '\n')
			break;
		n++;
	}
	b[n] = 0;
	return b;
}

static void say(kr_upipe *p, const char *s)
{
	size_t done;
	KT_EQ(kr_upipe_write(p, s, strlen(s), &done), 0);
	KT_EQ(done, strlen(s));
}

/* A μprocess's stack is where karui's handlers run its calls, with a
 * signal frame each: those of ld.so's loading went deeper than a small
 * program's own.  They are dropped at the handover, so that
 * karui-bench-hello (seed 003's hello program, next to this test when
 * karui-bench is built), having said hello and waiting on its stdin,
 * holds no more of its stack than it does as a process (a page more, for
 * where the kernel puts a process's strings).  A program whose own calls
 * go deeper (cat's reads of 128 KiB) holds what they touched. */
static void a_waiting_uprocs_stack_holds_what_a_process_stack_does(void)
{
	static char hello[4096];
	kt_beside_me(hello, sizeof hello, "karui-bench-hello");
	if (access(hello, X_OK))
		KT_SKIP("no karui-bench-hello here (KARUI_BENCH=OFF)");
	start(1);
	need_uprocs();
	KT_EQ(kr_uproc_keep(0), 0);
	/* a first run: what the first μprocess and the first reads of
	 * karui pipes set up (on whatever stack runs them) is not its own */
	char *said, *hargv[] = {"karui-bench-hello", NULL};
	KT_EQ(run(hello, hargv, "", &said, NULL), 0);
	KT_CHECK(strcmp(said, "Hello, World\n") == 0);
	free(said);
	int in[2], out[2];
	KT_EQ(pipe2(in, O_CLOEXEC), 0);
	KT_EQ(pipe2(out, O_CLOEXEC), 0);
	pid_t pid = fork();
	if (pid == 0) {
		dup2(in[0], 0);
		dup2(out[1], 1);
		execl(hello, "karui-bench-hello", (char *)NULL);
		_exit(127);
	}
	close(in[0]);
	close(out[1]);
	char b[16];
	KT_EQ(read(out[0], b, 13), 13);
	long native = stack_dirty(pid);
	close(in[1]);
	int st = -1;
	KT_EQ(waitpid(pid, &st, 0), pid);
	KT_CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	close(out[0]);
	KT_CHECK(native > 0);
	static uintptr_t before[4096][2];
	int n = maps_of(before, 4096, 0);
	kr_upipe *pin, *pout;
	kr_uproc *up = spawn_piped(hello, hargv, &pin, &pout);
	KT_CHECK(strcmp(line_of(pout), "Hello, World") == 0);
	long mine = new_stack_kib(before, n);
	if (mine > native + 4)
		fprintf(stderr, "  stack: %ld KiB as a μprocess, %ld as a process\n", mine, native);
	KT_CHECK(mine > 0 && mine <= native + 4);
	kr_upipe_close(pin, KR_UPIPE_WRITE);
	kr_upipe_close(pout, KR_UPIPE_READ);
	KT_EQ(kr_uproc_wait(up, &st), 0);
	KT_EQ(st, 0);
	KT_EQ(kr_uproc_keep(8), 0);
	KT_EQ(kr_fini(), 0);
}

/* Wherever a μprocess is, kr_uproc_kill ends it with 128 + the signal:
 * waiting on its karui pipe, asleep, in a futex wait that nobody will
 * end, in a loop of system calls that its rewritten call sites serve
 * without trapping. */
static void a_kill_ends_a_uproc_wherever_it_waits(void)
{
	start(2);
	need_uprocs();
	char *cat[] = {"cat", NULL}, *sleep[] = {"sleep", "1000", NULL};
	char *spin[] = {"uproc_probe", "spin", NULL}, *wait[] = {"uproc_probe", "wait", NULL};
	struct {
		const char *path;
		char **argv;
		int sig;
	} c[] = {{"/bin/cat", cat, SIGTERM}, {"/bin/sleep", sleep, SIGINT},
		 {probe, spin, SIGHUP}, {"/bin/cat", cat, SIGKILL}, {probe, wait, SIGINT},
		 {probe, wait, SIGKILL}};
	for (unsigned i = 0; i < sizeof c / sizeof *c; i++) {
		kr_upipe *in, *out;
		kr_uproc *up = spawn_piped(c[i].path, c[i].argv, &in, &out);
		if (c[i].argv == cat) { /* it is in its read once it echoed a line */
			say(in, "one\n");
			KT_CHECK(strcmp(line_of(out), "one") == 0);
		}
		if (c[i].argv == wait) /* its futex wait comes right after */
			KT_CHECK(strcmp(line_of(out), "waiting") == 0);
		KT_EQ(kr_uproc_kill(up, c[i].sig), 0);
		int st = -1;
		KT_EQ(kr_uproc_wait(up, &st), 0);
		KT_EQ(st, 128 + c[i].sig);
		KT_EQ(kr_uproc_kill(up, SIGTERM), ESRCH);
		KT_EQ(kr_upipe_close(in, KR_UPIPE_WRITE), 0);
		KT_EQ(kr_upipe_close(out, KR_UPIPE_READ), 0);
	}
	KT_EQ(kr_fini(), 0);
}

/* Every pointer a μprocess hands karui may be bad: an unmapped page, a
 * non-canonical address, a read-only page where the call writes.  Each of
 * the probe's calls fails with EFAULT, as it does natively, and the host
 * goes on: the probe says so in the same words both ways. */
static void a_bad_pointer_is_efault_for_that_call_alone(void)
{
	start(2);
	need_uprocs();
	KT_CHECK(strstr(same_as_native(probe, "efault", 2), " calls\n"));
	KT_EQ(kr_fini(), 0);
}

/* A read of a karui pipe makes private only the pages its bytes land in,
 * as a read of a kernel pipe does: its buffer is probed by reading where
 * the μprocess's writable ranges cover it (docs/uproc.md), where a probe
 * by writing made every page of up to 64 KiB its own. */
static void a_pipe_read_makes_private_only_what_it_fills(void)
{
	start(2);
	need_uprocs();
	char cmd[4200], native[256], *out;
	snprintf(cmd, sizeof cmd, "printf 'x\\n' | %s readbuf", probe);
	FILE *f = popen(cmd, "r");
	KT_CHECK(f && fgets(native, sizeof native, f));
	KT_EQ(pclose(f), 0);
	KT_CHECK(strcmp(native, "4 KiB private, 2 bytes\n") == 0);
	char *argv[] = {"uproc_probe", "readbuf", NULL};
	KT_EQ(run(probe, argv, "x\n", &out, NULL), 0);
	if (strcmp(out, native))
		fprintf(stderr, "  readbuf said: %s", out);
	KT_CHECK(strcmp(out, native) == 0);
	free(out);
	KT_EQ(kr_fini(), 0);
}

/* The timed waits of a single-threaded program (futex waits with a
 * timeout) end at their timeout; alarm() ends pause() by SIGALRM; the
 * alternate signal stack is kept as set. */
static void timed_waits_alarms_and_altstacks_behave_as_natively(void)
{
	start(2);
	need_uprocs();
	probe_says("timed", NULL,
		   "sem Connection timed out, cond Connection timed out, mutex Connection timed out\n");
	KT_EQ(run_probe("alarm", NULL, NULL), 128 + SIGALRM);
	probe_says("altstack", NULL, "kept\n");
	KT_EQ(kr_fini(), 0);
}

/* A read of a host pipe that waits in the kernel (the epoll back end does
 * not make a shared pipe O_NONBLOCK) is cut short by a kill too. */
static void a_kill_ends_a_wait_in_the_kernel(void)
{
	setenv("KARUI_IO", "epoll", 1);
	start(2);
	need_uprocs();
	int p[2];
	KT_EQ(pipe2(p, O_CLOEXEC), 0);
	char *argv[] = {"cat", NULL};
	kr_uproc *up = spawn_cat_on(0, p[0], argv);
	KT_EQ(kr_mp_sleep_for(20000000), 0); /* most likely in its read by now */
	KT_EQ(kr_uproc_kill(up, SIGTERM), 0);
	int st = -1;
	KT_EQ(kr_uproc_wait(up, &st), 0);
	KT_EQ(st, 128 + SIGTERM);
	KT_EQ(fcntl(p[0], F_GETFL) & O_NONBLOCK, 0);
	close(p[0]);
	close(p[1]);
	KT_EQ(kr_fini(), 0);
	unsetenv("KARUI_IO");
}

/* What the μprocess set for a signal decides: ignored, nothing; caught,
 * its handler runs, and the read it was waiting in goes on (SA_RESTART);
 * blocked, nothing until it unblocks it; SIGKILL and a default that
 * ignores (SIGWINCH) as ever. */
static void a_kill_honours_what_the_uproc_set(void)
{
	start(2);
	need_uprocs();
	struct {
		const char *how, *sig;
		int kill, status;
	} c[] = {{"ign", "2", SIGINT, 0}, {"catch", "15", SIGTERM, 0},
		 {"block", "15", SIGTERM, 128 + SIGTERM}, {"ign", "9", SIGKILL, 128 + SIGKILL},
		 {"ign", "2", SIGWINCH, 0}};
	for (unsigned i = 0; i < sizeof c / sizeof *c; i++) {
		char *argv[] = {"uproc_probe", "sig", (char *)c[i].how, (char *)c[i].sig, NULL};
		kr_upipe *in, *out;
		kr_uproc *up = spawn_piped(probe, argv, &in, &out);
		KT_CHECK(strcmp(line_of(out), "ready") == 0);
		KT_EQ(kr_uproc_kill(up, c[i].kill), 0);
		if (!strcmp(c[i].how, "catch"))
			KT_CHECK(strcmp(line_of(out), "caught 15") == 0);
		if (!c[i].status || !strcmp(c[i].how, "block")) {
			/* still there: it answers */
			say(in, "ping\n");
			KT_CHECK(strcmp(line_of(out), "got ping") == 0);
		}
		if (!strcmp(c[i].how, "block"))
			say(in, "unblock\n"); /* and the pending signal ends it */
		KT_EQ(kr_upipe_close(in, KR_UPIPE_WRITE), 0);
		int st = -1;
		KT_EQ(kr_uproc_wait(up, &st), 0);
		KT_EQ(st, c[i].status);
		KT_EQ(kr_upipe_close(out, KR_UPIPE_READ), 0);
	}
	KT_EQ(kr_fini(), 0);
}

/* uproc_probe state ARG (with attr's environment): exits 0 and prints
 * `want`; whether it started from a kept image. */
static int state_says(const char *mode, const char *arg, const kr_uproc_attr *a, const char *want)
{
	char *out, *argv[] = {"uproc_probe", (char *)mode, (char *)arg, NULL};
	int reused;
	KT_EQ(run_r(probe, argv, NULL, &out, a, &reused), 0);
	if (strcmp(out, want))
		fprintf(stderr, "got \"%s\", want \"%s\"\n", out, want);
	KT_CHECK(strcmp(out, want) == 0);
	free(out);
	return reused;
}

/* A program ended by exit leaves its image; the next start of the same
 * file with the same environment, argv[0] and argc begins from it, with its
 * memory, pid, heap and exit handlers as fresh as the first time. */
static void a_kept_image_starts_as_the_program_did(void)
{
	start(2);
	need_uprocs();
	KT_EQ(kr_uproc_keep(8), 0);
	const char *one = "1 11 one uproc_probe - tid-ok\nbye\n";
	KT_EQ(state_says("state", "one", NULL, one), 0);
	KT_EQ(state_says("state", "two", NULL, "1 11 two uproc_probe - tid-ok\nbye\n"), 1);
	KT_EQ(state_says("state", "a-longer-argument", NULL,
			 "1 11 a-longer-argument uproc_probe - tid-ok\nbye\n"),
	      1);
	/* another environment, another argc: loaded afresh, right all the same */
	extern char **environ;
	int n = 0;
	while (environ[n])
		n++;
	char **env = calloc(n + 2, sizeof *env);
	KT_CHECK(env);
	memcpy(env, environ, n * sizeof *env);
	env[n] = "PROBE=x";
	kr_uproc_attr a;
	KT_EQ(kr_uproc_attr_init(&a), 0);
	a.envp = env;
	KT_EQ(state_says("state", "e", &a, "1 11 e uproc_probe x tid-ok\nbye\n"), 0);
	KT_EQ(state_says("state", "f", &a, "1 11 f uproc_probe x tid-ok\nbye\n"), 1);
	free(env);
	char *o;
	KT_EQ(run_probe("pid", NULL, &o), 0); /* argc 2: an image of its own */
	KT_EQ(last_reused, 0);
	free(o);
	/* the image of a μprocess that crashed, or changed a mapping of its
	 * image, is not kept */
	char *argv[] = {"uproc_probe", "segv", "x", NULL};
	KT_EQ(run(probe, argv, NULL, NULL, NULL), 128 + SIGSEGV);
	KT_EQ(last_reused, 1);
	KT_EQ(state_says("state", "three", NULL, "1 11 three uproc_probe - tid-ok\nbye\n"), 0);
	state_says("state-mprotect", NULL, NULL, "1 11 m uproc_probe - tid-ok\nbye\n");
	KT_EQ(state_says("state-mprotect", NULL, NULL, "1 11 m uproc_probe - tid-ok\nbye\n"), 0);
	/* kept across a stop and a start of karui */
	KT_EQ(state_says("state", "four", NULL, "1 11 four uproc_probe - tid-ok\nbye\n"), 1);
	KT_EQ(kr_fini(), 0);
	start(1);
	KT_EQ(state_says("state", "4b", NULL, "1 11 4b uproc_probe - tid-ok\nbye\n"), 1);
	/* none kept */
	KT_EQ(kr_uproc_keep(0), 0);
	KT_EQ(state_says("state", "five", NULL, "1 11 five uproc_probe - tid-ok\nbye\n"), 0);
	KT_EQ(state_says("state", "six", NULL, "1 11 six uproc_probe - tid-ok\nbye\n"), 0);
	KT_EQ(kr_fini(), 0);
}

/* Many runs of one program at once on two VPs, more than are kept: each
 * takes a kept image or loads afresh, and starts as the program did. */
static int reuses;

static void *state_runner(void *arg)
{
	for (int i = 0; i < 25; i++) {
		char a[32], want[96];
		snprintf(a, sizeof a, "w%d-%d", (int)(intptr_t)arg, i);
		snprintf(want, sizeof want, "1 11 %s uproc_probe - tid-ok\nbye\n", a);
		__atomic_add_fetch(&reuses, state_says("state", a, NULL, want), __ATOMIC_RELAXED);
	}
	return NULL;
}

static void kept_images_serve_runs_at_once(void)
{
	start(2);
	need_uprocs();
	KT_EQ(kr_uproc_keep(4), 0);
	enum { W = 6 };
	kr_mp *w[W];
	for (int i = 0; i < W; i++)
		KT_EQ(kr_mp_create(&w[i], NULL, state_runner, (void *)(intptr_t)i), 0);
	for (int i = 0; i < W; i++)
		KT_EQ(kr_mp_join(w[i], NULL), 0);
	KT_CHECK(reuses > 0);
	KT_EQ(kr_fini(), 0);
}

/* A read-only file mapping a run of a kept image made is the next run's
 * for the same pages of the same file, unless the file changed. */
static void a_kept_image_keeps_its_read_only_file_mappings(void)
{
	start(1);
	need_uprocs();
	char path[] = "/tmp/karui-test-map-XXXXXX";
	int fd = mkstemp(path);
	KT_CHECK(fd >= 0);
	KT_EQ(write(fd, "one", 3), 3);
	close(fd);
	char *o1, *o2, *o3, *argv[] = {"uproc_probe", "map", path, NULL};
	KT_EQ(run(probe, argv, NULL, &o1, NULL), 0);
	KT_EQ(run(probe, argv, NULL, &o2, NULL), 0);
	KT_EQ(last_reused, 1);
	KT_CHECK(strstr(o1, " one\n") && strcmp(o1, o2) == 0); /* the same pages */
	char next[sizeof path + 4]; /* replaced, as package managers and editors do */
	snprintf(next, sizeof next, "%s.new", path);
	fd = open(next, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	KT_CHECK(fd >= 0);
	KT_EQ(write(fd, "two", 3), 3);
	close(fd);
	KT_EQ(rename(next, path), 0);
	KT_EQ(run(probe, argv, NULL, &o3, NULL), 0);
	KT_EQ(last_reused, 1);
	KT_CHECK(strstr(o3, " two\n") != NULL);
	unlink(path);
	free(o1);
	free(o2);
	free(o3);
	KT_EQ(kr_fini(), 0);
}

/* /proc/self/maps lists the μprocess's own mappings, none of the host's:
 * its program, its libraries, its stack. */
static void its_maps_list_its_own_mappings(void)
{
	start(2);
	need_uprocs();
	char *out, *argv[] = {"cat", "/proc/self/maps", NULL};
	KT_EQ(run("/bin/cat", argv, NULL, &out, NULL), 0);
	char exe[4096];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
	KT_CHECK(n > 0);
	exe[n] = 0;
	KT_CHECK(strstr(out, "/cat\n") != NULL);
	KT_CHECK(strstr(out, "libc.so.6\n") != NULL);
	KT_CHECK(strstr(out, " [stack]\n") != NULL);
	KT_CHECK(strstr(out, exe) == NULL); /* the host's program */
	KT_CHECK(strstr(out, "[heap]") == NULL);
	/* every line as the kernel writes it: start-end perms offset dev inode */
	int lines = 0;
	for (char *l = out; *l; l = strchr(l, '\n') + 1, lines++) {
		unsigned long long lo, hi, off, ino;
		unsigned maj, min;
		char perm[5];
		KT_EQ(sscanf(l, "%llx-%llx %4s %llx %x:%x %llu", &lo, &hi, perm, &off, &maj, &min, &ino), 7);
		KT_CHECK(lo < hi);
	}
	KT_CHECK(lines > 5);
	free(out);
	KT_EQ(kr_fini(), 0);
}

static void a_static_pie_program_runs_too(void)
{
	start(1);
	need_uprocs();
	char path[4096];
	snprintf(path, sizeof path, "%s-static", probe);
	if (access(path, X_OK))
		KT_SKIP("no static-PIE build of uproc_probe (the toolchain has no -static-pie)");
	char *out, *argv[] = {"uproc_probe", "exit", "9", NULL};
	KT_EQ(run(path, argv, NULL, &out, NULL), 9);
	KT_CHECK(strcmp(out, "before exit\n") == 0);
	free(out);
	KT_EQ(kr_fini(), 0);
}

/* ---- malformed programs ---- */

static char mangled[128]; /* the file mangled_child spawns */

/* Spawn `mangled` with its output thrown away: exit 10 if the spawn is
 * refused with an error a malformed file may give, 11 if it ran and ended
 * with a status; 77 without μprocesses. */
static void mangled_child(void)
{
	alarm(30); /* a hang is a failure of this child, not of the test */
	start(1);
	need_uprocs();
	int null = open("/dev/null", O_WRONLY);
	KT_CHECK(null >= 0);
	kr_uproc_attr a;
	KT_EQ(kr_uproc_attr_init(&a), 0);
	KT_EQ(kr_uproc_attr_fd_host(&a, 1, null), 0);
	KT_EQ(kr_uproc_attr_fd_host(&a, 2, null), 0);
	kr_uproc *up;
	char *argv[] = {"true", NULL};
	int e = kr_uproc_spawn(&up, mangled, argv, &a);
	if (e) {
		KT_CHECK(e == ENOEXEC || e == ENOMEM);
		_exit(10);
	}
	int st = -1;
	KT_EQ(kr_uproc_wait(up, &st), 0);
	KT_CHECK(st >= 0 && st < 256);
	_exit(11);
}

/* What mangled_child says of `mangled`: 10 or 11, else the test fails. */
static int spawn_mangled(const char *what)
{
	int r = in_child(mangled_child);
	if (r != 10 && r != 11) {
		fprintf(stderr, "  %s: the host ended with %d (%s)\n", what, r,
			r > 128 ? strsignal(r - 128) : "exit");
		_exit(1);
	}
	return r;
}

/* Write len bytes of data to path, executable. */
static void write_file(const char *path, const void *data, size_t len)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0755);
	KT_CHECK(fd >= 0);
	KT_EQ(write(fd, data, len), (ssize_t)len);
	close(fd);
}

/* An ELF file read whole: where its ELF and program headers end, where
 * its last loaded byte. */
struct elf_file {
	unsigned char *img;
	size_t size, headers, loaded;
	const Elf64_Phdr *interp;
};

static void read_elf(const char *path, struct elf_file *f)
{
	int fd = open(path, O_RDONLY);
	KT_CHECK(fd >= 0);
	struct stat st;
	KT_EQ(fstat(fd, &st), 0);
	f->size = (size_t)st.st_size;
	KT_CHECK((f->img = malloc(f->size)));
	KT_EQ(read(fd, f->img, f->size), (ssize_t)f->size);
	close(fd);
	const Elf64_Ehdr *eh = (const Elf64_Ehdr *)f->img;
	f->headers = eh->e_phoff + eh->e_phnum * sizeof(Elf64_Phdr);
	KT_CHECK(f->size > sizeof *eh && f->headers <= f->size);
	f->loaded = 0;
	f->interp = NULL;
	for (int i = 0; i < eh->e_phnum; i++) {
		const Elf64_Phdr *p = (const Elf64_Phdr *)(f->img + eh->e_phoff) + i;
		if (p->p_type == PT_LOAD && p->p_offset + p->p_filesz > f->loaded)
			f->loaded = p->p_offset + p->p_filesz;
		if (p->p_type == PT_INTERP)
			f->interp = p;
	}
}

/* f cut short (to 4 KiB, or short of its headers or of its last loaded
 * byte) at path, each spawned: refused. */
static void spawn_cut(const struct elf_file *f, const char *path)
{
	const size_t cuts[] = {4096, 64, f->headers - 1, f->loaded / 2, f->loaded - 1};
	for (size_t i = 0; i < sizeof cuts / sizeof *cuts; i++) {
		char what[4200];
		snprintf(what, sizeof what, "%s cut to %zu bytes", path, cuts[i]);
		write_file(path, f->img, cuts[i]);
		KT_EQ(spawn_mangled(what), 10);
	}
}

/* n copies of f at path, each with one to three bytes of its headers
 * changed (the same ones on every run), each spawned; how many ran. */
static int spawn_changed(const struct elf_file *f, const char *path, int n)
{
	unsigned char *copy = malloc(f->size);
	KT_CHECK(copy);
	uint64_t seed = 0x9e3779b97f4a7c15u;
	int ran = 0;
	for (int i = 0; i < n; i++) {
		memcpy(copy, f->img, f->size);
		char what[4200];
		int len = snprintf(what, sizeof what, "%s #%d, changed at", path, i);
		for (int k = 0, changes = 1 + i % 3; k < changes; k++) {
			seed ^= seed << 13, seed ^= seed >> 7, seed ^= seed << 17;
			size_t at = (seed >> 8) % f->headers;
			copy[at] ^= (unsigned char)(1 + seed % 255);
			len += snprintf(what + len, sizeof what - (size_t)len, " %zu", at);
		}
		write_file(path, copy, f->size);
		ran += spawn_mangled(what) == 11;
	}
	free(copy);
	return ran;
}

/* A program cut short, or with a few bytes of its ELF or program headers
 * changed, is refused or runs as a μprocess and ends with a status: the
 * host, a child process of the test each time, never dies of it. */
static void malformed_programs_are_refused_or_run_never_crash_the_host(void)
{
	start(1);
	need_uprocs();
	KT_EQ(kr_fini(), 0);
	struct elf_file f;
	read_elf("/bin/true", &f);
	char dir[] = "/tmp/karui-uproc-XXXXXX";
	KT_CHECK(mkdtemp(dir));
	snprintf(mangled, sizeof mangled, "%s/true", dir);
	spawn_cut(&f, mangled);
	int ran = spawn_changed(&f, mangled, 300);
	KT_CHECK(ran > 0 && ran < 300);
	unlink(mangled);
	rmdir(dir);
	free(f.img);
}

/* The same of a program's interpreter: true, its PT_INTERP naming a copy
 * of its ld.so cut short or changed. */
static void a_malformed_interpreter_is_refused_or_runs_never_crashes_the_host(void)
{
	start(1);
	need_uprocs();
	KT_EQ(kr_fini(), 0);
	struct elf_file f, ld;
	read_elf("/bin/true", &f);
	KT_CHECK(f.interp);
	read_elf((const char *)f.img + f.interp->p_offset, &ld);
	char dir[] = "/tmp/karui-uproc-XXXXXX", interp[256];
	KT_CHECK(mkdtemp(dir));
	/* a path as long as the one true names */
	int len = snprintf(interp, sizeof interp, "%s/", dir);
	while ((size_t)len + 1 < f.interp->p_filesz)
		interp[len++] = 'l';
	interp[len] = 0;
	KT_EQ(len + 1, f.interp->p_filesz);
	memcpy(f.img + f.interp->p_offset, interp, (size_t)len + 1);
	snprintf(mangled, sizeof mangled, "%s/true", dir);
	write_file(mangled, f.img, f.size);
	spawn_cut(&ld, interp);
	int ran = spawn_changed(&ld, interp, 100);
	KT_CHECK(ran > 0 && ran < 100);
	unlink(interp);
	unlink(mangled);
	rmdir(dir);
	free(f.img);
	free(ld.img);
}

/* ---- sockets and the kernel's other fds ---- */

/* All that cmd prints on its stdout, malloc'ed. */
static char *native_out(const char *cmd)
{
	FILE *f = popen(cmd, "r");
	KT_CHECK(f);
	size_t cap = 1 << 16, len = 0, n;
	char *b = malloc(cap);
	KT_CHECK(b);
	while ((n = fread(b + len, 1, cap - 1 - len, f)) > 0)
		if ((len += n) == cap - 1)
			KT_CHECK((b = realloc(b, cap *= 2)));
	b[len] = 0;
	KT_EQ(pclose(f), 0);
	return b;
}

/* uproc_probe MODE [ARG] says as a μprocess all it says natively. */
static void probe_like_native(const char *mode, const char *arg)
{
	char cmd[4200], *out;
	snprintf(cmd, sizeof cmd, "%s %s %s%s%s", probe, mode, arg ? "'" : "", arg ? arg : "",
		 arg ? "'" : "");
	char *native = native_out(cmd);
	KT_EQ(run_probe(mode, arg, &out), 0);
	if (strcmp(out, native))
		fprintf(stderr, "  native:\n%s  as a μprocess:\n%s", native, out);
	KT_CHECK(strcmp(out, native) == 0);
	free(out);
	free(native);
}

/* eventfd, timerfd (a read that waits for it), memfd, epoll over a socket,
 * an eventfd and a timerfd (a wait that ends by its timeout, one that a
 * timer ends), a socketpair carrying an fd, inotify and extended
 * attributes by relative paths, and the errors of fds of other kinds or
 * none: as natively, on both I/O back ends. */
static void sockets_and_the_kernels_other_fds_behave_as_natively(void)
{
	const char *backends[] = {"io_uring", "epoll"};
	for (int k = 0; k < 2; k++) {
		setenv("KARUI_IO", backends[k], 1);
		start(2);
		need_uprocs();
		probe_like_native("kfds", NULL);
		char dir[] = "/tmp/karui-kfd-XXXXXX";
		KT_CHECK(mkdtemp(dir));
		probe_like_native("inotify", dir);
		probe_like_native("xattr", dir);
		KT_EQ(rmdir(dir), 0);
		KT_EQ(kr_fini(), 0);
	}
}

/* The threads of this process but the kernel's io_uring workers. */
static int threads(void)
{
	DIR *d = opendir("/proc/self/task");
	KT_CHECK(d);
	int n = 0;
	for (struct dirent *e; (e = readdir(d));) {
		char path[300], comm[32] = "";
		snprintf(path, sizeof path, "/proc/self/task/%s/comm", e->d_name);
		FILE *f = e->d_name[0] != '.' ? fopen(path, "r") : NULL;
		if (f && fgets(comm, sizeof comm, f))
			n += strncmp(comm, "iou-", 4) != 0;
		if (f)
			fclose(f);
	}
	closedir(d);
	return n;
}

static volatile int counting;
static unsigned long counted;

static void *counter(void *arg)
{
	(void)arg;
	while (counting) {
		counted++;
		kr_mp_yield();
	}
	return NULL;
}

/* All that p gives until its end. */
static char *all_of(kr_upipe *p)
{
	size_t cap = 4096, len = 0, got;
	char *b = malloc(cap);
	KT_CHECK(b);
	do {
		KT_EQ(kr_upipe_read(p, b + len, cap - 1 - len, &got), 0);
		len += got;
	} while (got && len < cap - 1);
	b[len] = 0;
	return b;
}

/* A TCP server and its client, μprocesses on loopback, on one VP: while
 * the server waits in accept (and then in its read, the client sending a
 * little later) only its microprocess waits; another one counts meanwhile,
 * and no thread is started to hold the wait. */
static void a_tcp_server_and_client_wait_in_their_microprocesses_alone(void)
{
	start(1);
	need_uprocs();
	counting = 1;
	kr_mp *cm;
	KT_EQ(kr_mp_create(&cm, NULL, counter, NULL), 0);
	char *sa[] = {"uproc_probe", "tcp-server", NULL};
	kr_upipe *sin, *sout;
	kr_uproc *srv = spawn_piped(probe, sa, &sin, &sout);
	int port = 0;
	KT_EQ(sscanf(line_of(sout), "port %d", &port), 1);
	int th = threads();
	unsigned long c0 = counted;
	KT_EQ(kr_mp_sleep_for(100000000), 0); /* the server is in accept */
	KT_CHECK(counted - c0 > 100);
	KT_EQ(threads(), th);
	char ps[16];
	snprintf(ps, sizeof ps, "%d", port);
	char *ca[] = {"uproc_probe", "tcp-client", ps, NULL};
	kr_upipe *cin, *cout;
	kr_uproc *cli = spawn_piped(probe, ca, &cin, &cout);
	char *got = all_of(cout);
	KT_CHECK(strcmp(got, "hello karui from 127.0.0.1\n") == 0);
	KT_CHECK(strcmp(line_of(sout), "served") == 0);
	KT_EQ(threads(), th);
	int s1 = -1, s2 = -1;
	KT_EQ(kr_uproc_wait(srv, &s1), 0);
	KT_EQ(kr_uproc_wait(cli, &s2), 0);
	KT_EQ(s1, 0);
	KT_EQ(s2, 0);
	counting = 0;
	KT_EQ(kr_mp_join(cm, NULL), 0);
	free(got);
	kr_upipe_close(sin, KR_UPIPE_WRITE);
	kr_upipe_close(sout, KR_UPIPE_READ);
	kr_upipe_close(cin, KR_UPIPE_WRITE);
	kr_upipe_close(cout, KR_UPIPE_READ);
	KT_EQ(kr_fini(), 0);
}

/* One μprocess sends another an eventfd over a local socket (SCM_RIGHTS);
 * the receiver's read of it waits, on the one VP, until the sender
 * writes it 50 ms later. */
static void an_eventfd_passed_between_uprocs_wakes_its_reader(void)
{
	start(1);
	need_uprocs();
	char name[64];
	snprintf(name, sizeof name, "karui-test-%d", getpid());
	char *ga[] = {"uproc_probe", "give", name, NULL}, *ta[] = {"uproc_probe", "take", name, NULL};
	kr_upipe *gin, *gout, *tin, *tout;
	kr_uproc *g = spawn_piped(probe, ga, &gin, &gout);
	KT_CHECK(strcmp(line_of(gout), "ready") == 0);
	kr_uproc *t = spawn_piped(probe, ta, &tin, &tout);
	KT_CHECK(strcmp(line_of(tout), "took 5 waited cloexec 1") == 0);
	KT_CHECK(strcmp(line_of(gout), "gave") == 0);
	int s1 = -1, s2 = -1;
	KT_EQ(kr_uproc_wait(g, &s1), 0);
	KT_EQ(kr_uproc_wait(t, &s2), 0);
	KT_EQ(s1, 0);
	KT_EQ(s2, 0);
	kr_upipe_close(gin, KR_UPIPE_WRITE);
	kr_upipe_close(gout, KR_UPIPE_READ);
	kr_upipe_close(tin, KR_UPIPE_WRITE);
	kr_upipe_close(tout, KR_UPIPE_READ);
	KT_EQ(kr_fini(), 0);
}

/* A μprocess that waits on a socket, an eventfd, in epoll_wait or in
 * select, with nothing to come, is ended by a kill, on both I/O back
 * ends. */
static void a_kill_ends_a_wait_on_a_socket_or_an_event_fd(void)
{
	const char *backends[] = {"io_uring", "epoll"};
	const char *what[] = {"accept", "recv", "eventfd", "epoll", "select"};
	for (int k = 0; k < 2; k++) {
		setenv("KARUI_IO", backends[k], 1);
		start(1);
		need_uprocs();
		for (unsigned i = 0; i < sizeof what / sizeof *what; i++) {
			char *argv[] = {"uproc_probe", "block", (char *)what[i], NULL};
			kr_upipe *in, *out;
			kr_uproc *up = spawn_piped(probe, argv, &in, &out);
			KT_CHECK(strcmp(line_of(out), "waiting") == 0);
			KT_EQ(kr_mp_sleep_for(10000000), 0); /* in its wait by now, most likely */
			KT_EQ(kr_uproc_kill(up, SIGTERM), 0);
			int st = -1;
			KT_EQ(kr_uproc_wait(up, &st), 0);
			KT_EQ(st, 128 + SIGTERM);
			kr_upipe_close(in, KR_UPIPE_WRITE);
			kr_upipe_close(out, KR_UPIPE_READ);
		}
		KT_EQ(kr_fini(), 0);
	}
}

static void write_text(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");
	KT_CHECK(f && fputs(text, f) >= 0 && fclose(f) == 0);
}

/* ls -l of a directory named by a relative path (its lgetxattr and
 * getxattr of each file too), in the C locale and UTC: byte for byte what
 * it writes natively, on stdout and on stderr. */
/* A program that is not position-independent (Debian's python3) runs as
 * a μprocess at its link address, printing what it prints natively; while
 * it lives, a second one cannot have the address (EADDRINUSE: its caller
 * runs it as a child process); once it has ended, one can again. */
static int not_pie(const char *path)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	unsigned char eh[18];
	int ok = fd >= 0 && read(fd, eh, sizeof eh) == (ssize_t)sizeof eh && eh[16] == 2 /* ET_EXEC */;
	if (fd >= 0)
		close(fd);
	return ok;
}

static void a_program_that_is_not_pie_runs_at_its_address_one_at_a_time(void)
{
	start(2);
	need_uprocs();
	const char *py = "/usr/bin/python3";
	if (access(py, X_OK) || !not_pie(py))
		KT_SKIP("no python3 that is not position-independent here");
	KT_EQ(kr_uproc_keep(0), 0); /* a kept image would hold the address */
	const char *code = "import hashlib, json, sys; "
			   "print(json.dumps({'sha': hashlib.sha256(b'karui').hexdigest(), "
			   "'sum': sum(range(1000)), 'argv': sys.argv[1:]}))";
	char cmd[600];
	snprintf(cmd, sizeof cmd, "%s -c \"%s\" one two", py, code);
	char *native = native_out(cmd);
	char *out, *argv[] = {"python3", "-c", (char *)code, "one", "two", NULL};
	KT_EQ(run(py, argv, NULL, &out, NULL), 0);
	if (strcmp(out, native))
		fprintf(stderr, "  native:\n%s  as a μprocess:\n%s", native, out);
	KT_CHECK(strcmp(out, native) == 0 && strstr(out, "\"sum\": 499500"));
	free(out);
	free(native);
	/* one that waits on its stdin holds the address */
	kr_upipe *in;
	KT_EQ(kr_upipe_create(&in), 0);
	kr_uproc_attr a;
	KT_EQ(kr_uproc_attr_init(&a), 0);
	KT_EQ(kr_uproc_attr_fd_pipe(&a, 0, in, KR_UPIPE_READ), 0);
	char *wait_argv[] = {"python3", "-c", "import sys; sys.exit(len(sys.stdin.read()))", NULL};
	kr_uproc *first, *second;
	KT_EQ(kr_uproc_spawn(&first, py, wait_argv, &a), 0);
	KT_EQ(kr_uproc_spawn(&second, py, wait_argv, &a), EADDRINUSE);
	size_t n;
	KT_EQ(kr_upipe_write(in, "abc", 3, &n), 0);
	KT_EQ(kr_upipe_close(in, KR_UPIPE_WRITE), 0);
	int st;
	KT_EQ(kr_uproc_wait(first, &st), 0);
	KT_EQ(st, 3);
	KT_EQ(run(py, argv, NULL, &out, NULL), 0);
	free(out);
	KT_EQ(kr_fini(), 0);
}

static void ls_l_lists_a_directory_as_natively(void)
{
	start(2);
	need_uprocs();
	char dir[] = "/tmp/karui-ls-XXXXXX", path[256];
	KT_CHECK(mkdtemp(dir));
	snprintf(path, sizeof path, "%s/t", dir);
	KT_EQ(mkdir(path, 0755), 0);
	snprintf(path, sizeof path, "%s/t/a", dir);
	write_text(path, "some text\n");
	snprintf(path, sizeof path, "%s/t/b", dir);
	write_text(path, "");
	KT_EQ(chmod(path, 0640), 0);
	snprintf(path, sizeof path, "%s/t/l", dir);
	KT_EQ(symlink("a", path), 0);
	snprintf(path, sizeof path, "%s/t/d", dir);
	KT_EQ(mkdir(path, 0700), 0);
	char cmd[600];
	snprintf(cmd, sizeof cmd, "cd %s && env -i LC_ALL=C TZ=UTC /bin/ls -l t 2>native.err", dir);
	char *native = native_out(cmd);
	KT_CHECK(strstr(native, " a\n") && strstr(native, " l -> a\n"));
	kr_uproc_attr a;
	KT_EQ(kr_uproc_attr_init(&a), 0);
	char *env[] = {"LC_ALL=C", "TZ=UTC", NULL};
	a.cwd = dir;
	a.envp = env;
	snprintf(path, sizeof path, "%s/uproc.err", dir);
	int err = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	KT_CHECK(err >= 0);
	KT_EQ(kr_uproc_attr_fd_host(&a, 2, err), 0);
	char *out, *argv[] = {"ls", "-l", "t", NULL};
	KT_EQ(run("/bin/ls", argv, NULL, &out, &a), 0);
	close(err);
	if (strcmp(out, native))
		fprintf(stderr, "  native:\n%s  as a μprocess:\n%s", native, out);
	KT_CHECK(strcmp(out, native) == 0);
	snprintf(cmd, sizeof cmd, "cd %s && cat native.err && echo ---- && cat uproc.err", dir);
	char *errs = native_out(cmd);
	KT_CHECK(strcmp(errs, "----\n") == 0); /* nothing on either stderr */
	snprintf(cmd, sizeof cmd, "rm -r %s", dir);
	KT_EQ(system(cmd), 0);
	free(errs);
	free(out);
	free(native);
	KT_EQ(kr_fini(), 0);
}

/* A small HTTP server of the host's, on karui's I/O: one request, one
 * answer. */
static int http_listener;
static const char http_body[] = "hello from karui's server\n";

static void *http_serve(void *arg)
{
	(void)arg;
	int c;
	KT_EQ(kr_accept(http_listener, NULL, NULL, SOCK_CLOEXEC, &c), 0);
	char req[4096];
	size_t len = 0, got;
	while (len < sizeof req - 1 && (len < 4 || memcmp(req + len - 4, "\r\n\r\n", 4))) {
		KT_EQ(kr_read(c, req + len, sizeof req - 1 - len, &got), 0);
		KT_CHECK(got > 0);
		len += got;
	}
	req[len] = 0;
	KT_CHECK(strncmp(req, "GET /karui HTTP/1.", 18) == 0);
	char ans[256];
	int n = snprintf(ans, sizeof ans,
			 "HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\nContent-Length: %zu\r\n"
			 "Connection: close\r\n\r\n%s",
			 strlen(http_body), http_body);
	KT_EQ(kr_write_all(c, ans, (size_t)n, NULL), 0);
	KT_EQ(kr_close(c), 0);
	return NULL;
}

/* `tool`, as a μprocess with argv (its last entry, NULL, becomes the
 * URL), fetches a page from a server on loopback. */
static void fetch_page(const char *tool, char **argv, int url_at)
{
	char cmd[64];
	snprintf(cmd, sizeof cmd, "command -v %s || true", tool);
	char *where = native_out(cmd);
	if (!*where)
		KT_SKIP(tool[0] == 'c' ? "no curl here" : "no wget here");
	where[strcspn(where, "\n")] = 0;
	start(2);
	need_uprocs();
	http_listener = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t sl = sizeof sa;
	KT_CHECK(http_listener >= 0);
	KT_EQ(bind(http_listener, (void *)&sa, sizeof sa), 0);
	KT_EQ(listen(http_listener, 4), 0);
	KT_EQ(getsockname(http_listener, (void *)&sa, &sl), 0);
	kr_mp *srv;
	KT_EQ(kr_mp_create(&srv, NULL, http_serve, NULL), 0);
	char url[64], *out;
	snprintf(url, sizeof url, "http://127.0.0.1:%d/karui", ntohs(sa.sin_port));
	argv[url_at] = url;
	KT_EQ(run(where, argv, NULL, &out, NULL), 0);
	KT_CHECK(strcmp(out, http_body) == 0);
	KT_EQ(kr_mp_join(srv, NULL), 0);
	KT_EQ(kr_close(http_listener), 0);
	free(out);
	free(where);
	KT_EQ(kr_fini(), 0);
}

/* curl waits in poll; wget in select (pselect6). */
static void curl_fetches_a_page_from_a_local_server(void)
{
	char *argv[] = {"curl", "-q", "-s", "-S", "--max-time", "30", NULL, NULL};
	fetch_page("curl", argv, 6);
}

static void wget_fetches_a_page_from_a_local_server(void)
{
	char *argv[] = {"wget", "--no-config", "-q", "-O", "-", "--timeout=30", "--tries=1", NULL, NULL};
	fetch_page("wget", argv, 7);
}

/* What a μprocess cannot do with fds: put a karui pipe (which has no host
 * fd) in an epoll set (EPERM, as the kernel says of files it cannot
 * poll), or reach one of the host's own fds by its number (EBADF
 * everywhere: it has only its table). */
static void a_uproc_reaches_no_fd_but_its_own(void)
{
	start(2);
	need_uprocs();
	probe_says("epoll-pipe", NULL, "EPERM\n");
	int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	KT_CHECK(s >= 0);
	KT_EQ(dup3(s, 100, O_CLOEXEC), 100); /* the host's fd 100: no fd of the probe's */
	probe_says("hostfd", "100",
		   "fstat EBADF connect EBADF epoll EBADF getsockopt EBADF rights EBADF "
		   "ficlone EBADF ficlonerange EBADF\n");
	close(100);
	close(s);
	KT_EQ(kr_fini(), 0);
}

/* ---- exec, vfork, posix_spawn, waits ---- */

/* argv (argv[0] the program's path) as a μprocess: its status, its stdout
 * in *out */
static int run_argv(char *const *argv, char **out)
{
	return run(argv[0], argv, NULL, out, NULL);
}

/* The number after `key ` in s. */
static long number_after(const char *s, const char *key)
{
	const char *p = strstr(s, key);
	KT_CHECK(p);
	return strtol(p + strlen(key), NULL, 10);
}

/* execve replaces the μprocess's image: the new program's output and
 * status are the μprocess's, its pid is the same, its close-on-exec fds
 * are closed and the others kept; a #! script runs its interpreter with
 * the line's argument; the calls that fail leave the old image running
 * with the kernel's errors. */
static void exec_replaces_the_image_keeping_pid_and_fds(void)
{
	start(2);
	need_uprocs();
	char *out;
	char *pid[] = {(char *)probe, "exec", (char *)probe, "uproc_probe", "pid", NULL};
	KT_EQ(run_argv(pid, &out), 0);
	long before = number_after(out, "pid "), after = number_after(out, "\n");
	KT_CHECK(before >= 4194304);
	KT_EQ(after, before);
	free(out);
	char *echo[] = {(char *)probe, "exec", "/bin/echo", "echo", "a", "b  c", NULL};
	KT_EQ(run_argv(echo, &out), 0);
	KT_CHECK(strstr(out, "\na b  c\n") && !strstr(out, "exec "));
	free(out);
	char *fls[] = {(char *)probe, "exec", "/bin/false", "false", NULL};
	KT_EQ(run_argv(fls, NULL), 1);
	probe_says("cloexec", probe, "fds: 0 1 2 6\n");
	probe_says("setuid-same", NULL, "0\n");

	char dir[] = "/tmp/karui-exec-XXXXXX", path[128], want[256];
	KT_CHECK(mkdtemp(dir));
	probe_like_native("exec-errors", dir);
	probe_like_native("exec-vdso", "/bin/echo");
	snprintf(path, sizeof path, "%s/script", dir);
	write_text(path, "#!/bin/sh -u\necho \"script $0 $*\"\nexit 5\n");
	KT_EQ(chmod(path, 0755), 0);
	char *script[] = {(char *)probe, "exec", path, "name", "x", "y", NULL};
	KT_EQ(run_argv(script, &out), 5);
	snprintf(want, sizeof want, "\nscript %s x y\n", path);
	KT_CHECK(strstr(out, want));
	free(out);
	KT_EQ(unlink(path), 0);
	KT_EQ(rmdir(dir), 0);
	KT_EQ(kr_fini(), 0);
}

/* system, popen, posix_spawn and vfork run their children as μprocesses
 * of the same process, and the parent collects them with waitpid and
 * waitid: as natively, byte for byte. */
static void system_popen_and_posix_spawn_run_their_children_as_uprocs(void)
{
	start(2);
	need_uprocs();
	probe_says("system", "echo hi; exit 3", "hi\nstatus exited 3\n");
	probe_like_native("system", "echo hi; exit 3");
	probe_like_native("popen", "printf abc");
	probe_like_native("spawn", "/bin/true");
	char *out;
	char *spawn[] = {(char *)probe, "spawn", "/bin/true", "/bin/false", "/nonexistent", NULL};
	KT_EQ(run_argv(spawn, &out), 0);
	KT_CHECK(strcmp(out, "/nonexistent: ENOENT\n/bin/true: exited 0\n/bin/false: exited 1\n"
			     "then ECHILD\n") == 0);
	free(out);
	probe_like_native("vfork-exit", "7");
	probe_like_native("waits", NULL);
	probe_says("spawn-many", "200", "ok\n");
	KT_EQ(kr_fini(), 0);
}

/* A vfork child that returns from the function that called vfork (what
 * the kernel leaves undefined) runs the parent's code on its stack; the
 * host goes on, whatever becomes of the μprocess. */
static void a_vfork_child_that_returns_never_crashes_the_host(void)
{
	start(1);
	need_uprocs();
	for (int i = 0; i < 20; i++) {
		int st = run_probe("vfork-return", NULL, NULL);
		KT_CHECK(st >= 0 && st < 256);
	}
	need_uprocs();
	KT_EQ(kr_fini(), 0);
}

/* A script that execs itself 1,000 times: each exec replaces the image,
 * and the host's fds and memory stay as they were. */
static void a_thousand_execs_leave_fd_count_and_rss_flat(void)
{
	start(2);
	need_uprocs();
	char dir[] = "/tmp/karui-chain-XXXXXX", path[128];
	KT_CHECK(mkdtemp(dir));
	snprintf(path, sizeof path, "%s/chain", dir);
	write_text(path, "#!/bin/sh\nif [ \"$1\" -gt 0 ]; then exec \"$0\" $(($1 - 1)); fi\n"
			 "echo done\n");
	KT_EQ(chmod(path, 0755), 0);
	char *out, *small[] = {"/bin/sh", path, "10", NULL};
	KT_EQ(run_argv(small, &out), 0);
	KT_CHECK(strcmp(out, "done\n") == 0);
	free(out);
	int fds = host_fds();
	long rss = rss_kib();
	int n = KT_TSAN ? 100 : 1000;
	char count[16];
	snprintf(count, sizeof count, "%d", n);
	char *chain[] = {"/bin/sh", path, count, NULL};
	KT_EQ(run_argv(chain, &out), 0);
	KT_CHECK(strcmp(out, "done\n") == 0);
	free(out);
	KT_EQ(host_fds(), fds);
	long grown = rss_kib() - rss;
	fprintf(stderr, "  rss grew %ld KiB over %d execs\n", grown, n);
#if !defined(__SANITIZE_ADDRESS__)
	KT_CHECK(grown < 8192);
#endif
	KT_EQ(unlink(path), 0);
	KT_EQ(rmdir(dir), 0);
	KT_EQ(kr_fini(), 0);
}

/* make runs its recipes with posix_spawn: a tiny Makefile builds as
 * natively (recipes that need a fork, a $(...) in the shell, cannot). */
static void make_builds_a_tiny_makefile(void)
{
	if (access("/usr/bin/make", X_OK))
		KT_SKIP("no /usr/bin/make here");
	start(2);
	need_uprocs();
	char dir[] = "/tmp/karui-make-XXXXXX", path[128], cmd[256];
	KT_CHECK(mkdtemp(dir));
	snprintf(path, sizeof path, "%s/Makefile", dir);
	write_text(path, "all: b.txt\n\tcat a.txt b.txt\n\t@echo made\n"
			 "b.txt: a.txt\n\tsed s/a/b/ a.txt > b.txt\n"
			 "a.txt:\n\tprintf 'a\\n' > a.txt\n");
	snprintf(cmd, sizeof cmd, "cd %s && make -s -f Makefile 2>&1 && rm a.txt b.txt", dir);
	char *native = native_out(cmd);
	kr_uproc_attr a;
	KT_EQ(kr_uproc_attr_init(&a), 0);
	a.cwd = dir;
	char *out, *argv[] = {"make", "-s", "-f", "Makefile", NULL};
	KT_EQ(run("/usr/bin/make", argv, NULL, &out, &a), 0);
	if (strcmp(out, native))
		fprintf(stderr, "  native:\n%s  as a μprocess:\n%s", native, out);
	KT_CHECK(strcmp(out, native) == 0);
	KT_CHECK(strcmp(out, "a\nb\nmade\n") == 0);
	free(out);
	free(native);
	snprintf(cmd, sizeof cmd, "rm -r %s", dir);
	KT_EQ(system(cmd), 0);
	KT_EQ(kr_fini(), 0);
}

/* make -j2 of a C project in a μprocess: gcc's driver, cc1 and collect2
 * are not position-independent, so where another μprocess holds their
 * link address they run as processes, each μprocess standing for its
 * program (its pid, its status); the program built prints what it does
 * built natively, and a kill of a μprocess that stands for a process
 * reaches the process. */
static void make_j2_compiles_a_c_project(void)
{
	if (access("/usr/bin/make", X_OK) || access("/usr/bin/cc", X_OK))
		KT_SKIP("no make or cc here");
	start(2);
	need_uprocs();
	char dir[] = "/tmp/karui-cc-XXXXXX", path[160], cmd[512];
	KT_CHECK(mkdtemp(dir));
	for (int i = 0; i < 4; i++) {
		char src[96];
		snprintf(path, sizeof path, "%s/f%d.c", dir, i);
		snprintf(src, sizeof src, "int f%d(int x) { return x * %d + 1; }\n", i, i + 2);
		write_text(path, src);
	}
	snprintf(path, sizeof path, "%s/main.c", dir);
	write_text(path, "#include <stdio.h>\nint f0(int), f1(int), f2(int), f3(int);\n"
			 "int main(void) { printf(\"%d\\n\", f0(1) + f1(2) + f2(3) + f3(4)); }\n");
	snprintf(path, sizeof path, "%s/Makefile", dir);
	write_text(path, "OBJ = main.o f0.o f1.o f2.o f3.o\nprog: $(OBJ)\n\tcc -o $@ $(OBJ)\n"
			 "%.o: %.c\n\tcc -O2 -c $<\n");
	kr_uproc_attr a;
	KT_EQ(kr_uproc_attr_init(&a), 0);
	a.cwd = dir;
	char *out, *argv[] = {"make", "-s", "-j2", NULL};
	KT_EQ(run("/usr/bin/make", argv, NULL, &out, &a), 0);
	KT_CHECK(strcmp(out, "") == 0);
	free(out);
	snprintf(cmd, sizeof cmd, "%s/prog", dir);
	out = native_out(cmd);
	KT_CHECK(strcmp(out, "44\n") == 0); /* 1*2+1 + 2*3+1 + 3*4+1 + 4*5+1 */
	free(out);
	/* a kill reaches the process a μprocess stands for: Python (not
	 * position-independent) execs itself, whose link address the old
	 * image holds at that moment */
	kr_upipe *in, *o;
	char *sargv[] = {"python3", "-c",
			 "import os; os.execv('/usr/bin/python3', ['python3', '-c', "
			 "'print(\"slept\", flush=True); import time; time.sleep(30)'])",
			 NULL};
	kr_uproc *up = spawn_piped("/usr/bin/python3", sargv, &in, &o);
	KT_CHECK(strcmp(line_of(o), "slept") == 0);
	KT_EQ(kr_uproc_kill(up, SIGTERM), 0);
	int st = -1;
	KT_EQ(kr_uproc_wait(up, &st), 0);
	KT_EQ(st, 128 + SIGTERM);
	KT_EQ(kr_upipe_close(in, KR_UPIPE_WRITE), 0);
	KT_EQ(kr_upipe_close(o, KR_UPIPE_READ), 0);
	snprintf(cmd, sizeof cmd, "rm -r %s", dir);
	KT_EQ(system(cmd), 0);
	/* the pumps of its pipes (made the kernel's for the process) end as
	 * they see the pipes' ends: then karui can end */
	int e;
	for (int i = 0; (e = kr_fini()) == EBUSY && i < 5000; i++)
		KT_EQ(kr_mp_sleep_for(1000000), 0);
	KT_EQ(e, 0);
}

/* Python's subprocess, in a μprocess, if Python can be one. */
static void python_subprocess_runs_echo(void)
{
	if (access("/usr/bin/python3", X_OK))
		KT_SKIP("no /usr/bin/python3 here");
	start(1);
	need_uprocs();
	kr_uproc *up;
	char *argv[] = {"python3", "-c", "import subprocess; subprocess.run(['echo', 'x'])", NULL};
	int e = kr_uproc_spawn(&up, "/usr/bin/python3", argv, NULL);
	KT_EQ(e, 0);
	int st = -1;
	KT_EQ(kr_uproc_wait(up, &st), 0);
	char *out;
	KT_EQ(run("/usr/bin/python3", argv, NULL, &out, NULL), 0);
	KT_CHECK(strcmp(out, "x\n") == 0);
	free(out);
	KT_EQ(kr_fini(), 0);
}

/* ---- signals delivered to the μprocess's handlers ---- */

/* uproc_probe MODE says as a μprocess what it says natively, its first
 * `lines` lines (0: all). */
static void probe_like_native_n(const char *mode, int lines)
{
	char cmd[4200], *out;
	snprintf(cmd, sizeof cmd, "%s %s", probe, mode);
	char *native = native_out(cmd);
	KT_EQ(run_probe(mode, NULL, &out), 0);
	char *a = native, *b = out;
	for (int i = 0; lines && i < lines && a && b; i++) {
		a = strchr(a, '\n');
		b = strchr(b, '\n');
		a = a ? a + 1 : a;
		b = b ? b + 1 : b;
	}
	if (lines && a && b)
		*a = *b = 0;
	if (strcmp(out, native))
		fprintf(stderr, "  native:\n%s  as a μprocess:\n%s", native, out);
	KT_CHECK(strcmp(out, native) == 0);
	KT_CHECK(strlen(out) > 10);
	free(out);
	free(native);
}

/* Handlers run as natively: raised, killed and tgkilled to itself a
 * hundred times each (from trapping sites, then rewritten ones), with
 * their siginfo, their masks, SA_NODEFER, SA_RESETHAND, a blocked signal
 * delivered once unblocked, an ignored one dropped, the interrupted FP
 * state kept; on the alternate stack; SIGPIPE's handler; sigsuspend and
 * sigtimedwait; SIGALRM's handler from alarm and setitimer. */
static void handlers_run_as_natively(void)
{
	start(2);
	need_uprocs();
	probe_like_native_n("handlers", 0);
	probe_like_native_n("sigaltstack", 0);
	probe_like_native_n("sigpipe", 0);
	probe_like_native_n("sigwait", 0);
	probe_like_native_n("alarm-handler", 0);
	KT_EQ(kr_fini(), 0);
}

/* signalfd as natively, on both I/O back ends: its errors (a bad mask
 * pointer, size or flags, an fd of another kind, a read smaller than one
 * siginfo, a bad buffer); reads of raise, kill, a timer, a child's kill
 * and its exit, waiting or not; poll and select; its mask changed; dup;
 * a waiting read ended by a handler, or restarted with SA_RESTART; a fork
 * child reading its copy (a kernel signalfd there); an epoll loop over it
 * and a FIFO that a timer's signal wakes; the fd kept across an exec,
 * with the signal left pending. */
static void signalfd_reads_signals_as_natively(void)
{
	const char *backends[] = {"io_uring", "epoll"};
	for (int k = 0; k < 2; k++) {
		setenv("KARUI_IO", backends[k], 1);
		start(2);
		need_uprocs();
		probe_like_native("signalfd", probe);
		KT_EQ(kr_fini(), 0);
	}
}

/* A SIGCHLD handler runs at a child's end, with the child's pid and how it
 * ended, as natively. */
static void sigchld_runs_its_handler(void)
{
	start(2);
	need_uprocs();
	probe_like_native("sigchld", NULL);
	KT_EQ(kr_fini(), 0);
}

/* A fault in the μprocess's code runs its handler, which may siglongjmp
 * out (a NULL access, a division by zero, a stack overflow on the
 * alternate stack); a fault in the handler with its signal blocked is the
 * default action, as a fault with no handler: the μprocess ends, the
 * host goes on. */
static void a_fault_runs_the_handler_which_may_longjmp_out(void)
{
	start(2);
	need_uprocs();
	probe_like_native_n("segv-longjmp", 0);
	char *out;
	KT_EQ(run_probe("segv-in-handler", NULL, &out), 128 + SIGSEGV);
	free(out);
	KT_EQ(run_probe("segv", NULL, NULL), 128 + SIGSEGV);
	KT_EQ(run_probe("return", "0", NULL), 0); /* the host goes on */
	KT_EQ(kr_fini(), 0);
}

/* What a μprocess hands back in rt_sigreturn is checked: a context that
 * would run karui's code or memory, or garbage, ends it with SIGSEGV;
 * what it may not set (SIGKILL in its mask, MXCSR's reserved bits) is
 * left out; a handler at an unmapped address is SIGSEGV's default. */
static void a_forged_signal_frame_ends_its_uproc_alone(void)
{
	start(2);
	need_uprocs();
	const char *bad[] = {"rip", "rip-noncanon", "rsp", "fpregs", "garbage"};
	for (unsigned i = 0; i < sizeof bad / sizeof *bad; i++) {
		char *argv[] = {"uproc_probe", "forge", (char *)bad[i], NULL};
		KT_EQ(run(probe, argv, NULL, NULL, NULL), 128 + SIGSEGV);
	}
	char *out, *argv[] = {"uproc_probe", "forge", "mask-kill", NULL};
	KT_EQ(run(probe, argv, NULL, &out, NULL), 0);
	KT_CHECK(strcmp(out, "back: kill blocked 0 mxcsr default\n") == 0);
	free(out);
	char *mx[] = {"uproc_probe", "forge", "mxcsr", NULL};
	KT_EQ(run(probe, mx, NULL, &out, NULL), 0);
	KT_CHECK(strncmp(out, "back: kill blocked 0 mxcsr ", 27) == 0);
	free(out);
	KT_EQ(run_probe("bad-handler", NULL, NULL), 128 + SIGSEGV);
	KT_EQ(run_probe("return", "7", NULL), 7);
	KT_EQ(kr_fini(), 0);
}

/* A μprocess that computes without a system call: kr_uproc_kill
 * interrupts its VP, and the signal's default action ends it, or its
 * handler runs there; SIGKILL too.  (It holds its VP meanwhile: the
 * killer runs on another.) */
static void a_kill_reaches_a_uproc_that_makes_no_system_call(void)
{
	for (unsigned vps = 2; vps <= 3; vps++) {
		start(vps);
		need_uprocs();
		struct {
			int sig, handle, status;
		} c[] = {{SIGTERM, 0, 128 + SIGTERM}, {SIGKILL, 0, 128 + SIGKILL},
			 {SIGINT, 0, 128 + SIGINT}, {SIGTERM, 1, 0}};
		for (unsigned i = 0; i < sizeof c / sizeof *c; i++) {
			char *argv[] = {"uproc_probe", "loop-forever", c[i].handle ? "handle" : NULL,
					NULL};
			kr_upipe *in, *out;
			kr_uproc *up = spawn_piped(probe, argv, &in, &out);
			KT_CHECK(strcmp(line_of(out), "looping") == 0);
			KT_EQ(kr_mp_sleep_for(20000000), 0); /* well inside its loop */
			KT_EQ(kr_uproc_kill(up, c[i].sig), 0);
			if (c[i].handle)
				KT_CHECK(strcmp(line_of(out), "stopped") == 0);
			int st = -1;
			KT_EQ(kr_uproc_wait(up, &st), 0);
			KT_EQ(st, c[i].status);
			KT_EQ(kr_upipe_close(in, KR_UPIPE_WRITE), 0);
			KT_EQ(kr_upipe_close(out, KR_UPIPE_READ), 0);
		}
		KT_EQ(kr_fini(), 0);
	}
}

/* Many signals: each kill that the μprocess answers before the next runs
 * its handler once (none lost); a storm of them without waiting runs it
 * at least once and at most as often, and the μprocess and the host go
 * on; a read cut short by a handler without SA_RESTART fails with EINTR,
 * with it goes on. */
static void a_storm_of_signals_loses_none_that_were_waited_for(void)
{
	start(2);
	need_uprocs();
	char *argv[] = {"uproc_probe", "sig", "catch", "10", NULL};
	kr_upipe *in, *out;
	kr_uproc *up = spawn_piped(probe, argv, &in, &out);
	KT_CHECK(strcmp(line_of(out), "ready") == 0);
	for (int i = 0; i < 300; i++) {
		KT_EQ(kr_uproc_kill(up, SIGUSR1), 0);
		KT_CHECK(strcmp(line_of(out), "caught 10") == 0);
	}
	for (int i = 0; i < 20000; i++)
		KT_EQ(kr_uproc_kill(up, SIGUSR1), 0);
	say(in, "ping\n");
	int caught = 0;
	const char *l;
	while (strcmp((l = line_of(out)), "got ping"))
		KT_CHECK(strcmp(l, "caught 10") == 0 && ++caught <= 20000);
	KT_CHECK(caught >= 1);
	KT_EQ(kr_upipe_close(in, KR_UPIPE_WRITE), 0);
	int st = -1;
	KT_EQ(kr_uproc_wait(up, &st), 0);
	KT_EQ(st, 0);
	KT_EQ(kr_upipe_close(out, KR_UPIPE_READ), 0);
	KT_EQ(kr_fini(), 0);
}

/* kill between μprocesses, by their pids: a handler runs in the other
 * one, a default action ends it; a pid of none is ESRCH. */
static void uprocs_signal_each_other_by_pid(void)
{
	start(2);
	need_uprocs();
	char *argv[] = {"uproc_probe", "sig", "catch", "12", NULL};
	kr_upipe *in, *out;
	kr_uproc *up = spawn_piped(probe, argv, &in, &out);
	KT_CHECK(strcmp(line_of(out), "ready") == 0);
	char pid[32], *res;
	snprintf(pid, sizeof pid, "%d", (int)kr_uproc_pid(up));
	char *k1[] = {"uproc_probe", "kill", pid, "12", NULL};
	KT_EQ(run(probe, k1, NULL, &res, NULL), 0);
	KT_CHECK(strcmp(res, "sent\n") == 0);
	free(res);
	KT_CHECK(strcmp(line_of(out), "caught 12") == 0);
	char *k0[] = {"uproc_probe", "kill", "1", "0", NULL}; /* init: not a μprocess */
	KT_EQ(run(probe, k0, NULL, &res, NULL), 0);
	KT_CHECK(strcmp(res, "ESRCH\n") == 0);
	free(res);
	char *k2[] = {"uproc_probe", "kill", pid, "15", NULL};
	KT_EQ(run(probe, k2, NULL, &res, NULL), 0);
	free(res);
	int st = -1;
	KT_EQ(kr_uproc_wait(up, &st), 0);
	KT_EQ(st, 128 + SIGTERM);
	KT_EQ(kr_upipe_close(in, KR_UPIPE_WRITE), 0);
	KT_EQ(kr_upipe_close(out, KR_UPIPE_READ), 0);
	KT_EQ(kr_fini(), 0);
}

/* fork gives a real child process running the μprocess alone, which
 * exits as it will and is waited for; dash and bash, which fork for
 * pipelines, subshells, $(...) and background jobs, and Python's os.fork
 * with a pipe between the two, print what they print natively. */
static void fork_gives_a_real_child(void)
{
	start(2);
	need_uprocs();
	probe_says("fork", NULL, "forked\n");
	char dir[] = "/tmp/karui-fork-XXXXXX", sh[128], py[128];
	KT_CHECK(mkdtemp(dir));
	snprintf(sh, sizeof sh, "%s/s.sh", dir);
	snprintf(py, sizeof py, "%s/f.py", dir);
	FILE *f = fopen(sh, "w");
	KT_CHECK(f);
	fputs("x=$(echo sub; echo shell); echo \"got: $x\"\n"
	      "echo a b c | tr a-z A-Z | sed 's/B/b/'\n"
	      "( cd /; pwd; exit 3 ); echo \"status $?\"\n"
	      "for i in 1 2 3; do echo n$i; done | sort -r\n"
	      "sleep 0.05 & wait; echo \"waited $?\"\n"
	      "printf '%s\\n' z y x | while read l; do echo \"line $l\"; done\n"
	      "seq 1 20000 | wc -l; (exit 4) | cat; echo \"pipe $?\"\n",
	      f);
	KT_EQ(fclose(f), 0);
	f = fopen(py, "w");
	KT_CHECK(f);
	fputs("import os\n"
	      "r, w = os.pipe()\n"
	      "pid = os.fork()\n"
	      "if pid == 0:\n"
	      "    os.close(r); os.write(w, b'from the child'); os._exit(7)\n"
	      "os.close(w)\n"
	      "d = os.read(r, 100)\n"
	      "_, st = os.waitpid(pid, 0)\n"
	      "print(d.decode(), os.WEXITSTATUS(st), pid != os.getpid())\n",
	      f);
	KT_EQ(fclose(f), 0);
	const char *progs[][3] = {{"/usr/bin/dash", sh}, {"/bin/bash", sh}, {"/usr/bin/python3", py}};
	for (unsigned i = 0; i < 3; i++) {
		char cmd[4200], *out;
		snprintf(cmd, sizeof cmd, "%s %s", progs[i][0], progs[i][1]);
		char *native = native_out(cmd);
		char *argv[] = {(char *)progs[i][0], (char *)progs[i][1], NULL};
		KT_EQ(run(progs[i][0], argv, NULL, &out, NULL), 0);
		if (strcmp(out, native))
			fprintf(stderr, "  %s natively:\n%s  as a μprocess:\n%s", cmd, native, out);
		KT_CHECK(strcmp(out, native) == 0 && strlen(out) > 20);
		free(out);
		free(native);
	}
	unlink(sh);
	unlink(py);
	rmdir(dir);
	KT_EQ(kr_fini(), 0);
}

/* The pid the μprocess's `sh -c 'CMD & echo $!'` prints: a μprocess's
 * (above PID_MAX_LIMIT, 4194304) when the fork was deferred and its child
 * exec'd in place, a process's otherwise. */
static long bg_pid(const char *sh, const char *before)
{
	char cmd[256], *out, *argv[] = {(char *)sh, "-c", cmd, NULL};
	snprintf(cmd, sizeof cmd, "%s/bin/true & echo $!; wait", before);
	KT_EQ(run(sh, argv, NULL, &out, NULL), 0);
	long pid = atol(out);
	free(out);
	KT_CHECK(pid > 0);
	return pid;
}

/* A fork followed by exec runs in place, its child exec'ing a μprocess of
 * the same process (its pid a μprocess's: bg_pid), or ending there; a
 * child that makes any other call first (a subshell writing into a pipe
 * its parent reads: $(echo ...), (echo) | cat) becomes a real process
 * then.  dash and bash scripts (commands, pipelines, $(...), subshells, &
 * and wait, redirections, trap, exit statuses), Python's fork path
 * (preexec_fn, os.fork and exec), Perl's qx and system, awk's system and
 * getline from a command, make's $(shell) and recipes: what they print
 * natively, byte for byte; a μprocess that has written more than 8 MiB
 * forks for real, and KARUI_UPROC_FORK=real makes every fork a real one. */
static void a_fork_then_exec_runs_in_place(void)
{
	start(2);
	need_uprocs();
	char dir[] = "/tmp/karui-dfork-XXXXXX", sh[128], path[160], cmd[4200];
	KT_CHECK(mkdtemp(dir));
	snprintf(sh, sizeof sh, "%s/s.sh", dir);
	snprintf(cmd, sizeof cmd,
		 "exec 2>/dev/null; trap 'echo trapped' EXIT\n"
		 "/bin/echo simple; /bin/true && echo and\n"
		 "x=$(/bin/echo sub); echo \"got $x\"\n"
		 "y=$(echo built; echo in); echo \"got $y\"\n"
		 "echo a b c | tr a-z A-Z | cat\n"
		 "(echo sub) | cat; (exit 5); echo \"exit $?\"\n"
		 "( cd /; /bin/pwd; exit 3 ); echo \"status $?\"\n"
		 "/bin/echo bg > %s/bg.txt & wait $!; echo \"waited $?\"; cat %s/bg.txt\n"
		 "/bin/sh -c 'exit 7'; echo \"sh $?\"; false | true; echo \"pipe $?\"\n"
		 "/bin/echo gone 2>/dev/null 1>&2; /bin/echo r > %s/r.txt; cat < %s/r.txt\n"
		 "for i in 1 2 3; do /bin/echo n$i; done | sort -r\n"
		 "( /bin/true; /bin/echo nested ); ( /bin/echo x | cat; /bin/echo piped )\n"
		 "/bin/sh -c 'kill -TERM $$'; echo \"killed $?\"\n"
		 "z=$(/bin/sh -c 'exit 9'); echo \"z $? [$z]\"; exit 0\n",
		 dir, dir, dir, dir);
	write_text(sh, cmd);
	struct {
		const char *prog, *flag, *text;
	} progs[] = {
		{"/usr/bin/dash", NULL, sh},
		{"/bin/bash", NULL, sh},
		{"/usr/bin/python3", "-c",
		 "import os, subprocess\n"
		 "r = subprocess.run(['/bin/echo', 'pre'], preexec_fn=lambda: None, capture_output=True)\n"
		 "print(r.stdout, r.returncode, flush=True)\n"
		 "pid = os.fork()\n"
		 "if pid == 0:\n"
		 "    os.execv('/bin/sh', ['sh', '-c', 'echo exec; exit 4'])\n"
		 "print(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]), flush=True)\n"
		 "pid = os.fork()\n"
		 "if pid == 0:\n"
		 "    os._exit(6)\n"
		 "print(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))\n"},
		{"/usr/bin/perl", "-e",
		 "$| = 1; print qx(/bin/echo qx); print system('/bin/sh', '-c', 'exit 3') >> 8, "
		 "\"\\n\"; print `echo pipe | tr a-z A-Z`;"},
		{"/usr/bin/awk", "BEGIN { system(\"/bin/echo sys\"); \"/bin/echo line\" | getline x; "
				 "print x; print system(\"exit 2\") }",
		 NULL},
	};
	for (unsigned i = 0; i < sizeof progs / sizeof *progs; i++) {
		if (access(progs[i].prog, X_OK)) {
			fprintf(stderr, "  %s: not here\n", progs[i].prog);
			continue;
		}
		char *argv[] = {(char *)progs[i].prog, (char *)(progs[i].flag ? progs[i].flag : progs[i].text),
				(char *)(progs[i].flag ? progs[i].text : NULL), NULL};
		snprintf(path, sizeof path, "%s/argv", dir);
		/* natively: the same argv, through a file that holds the text */
		FILE *f = fopen(path, "w");
		KT_CHECK(f);
		for (int k = 0; argv[k]; k++)
			KT_CHECK(fwrite(argv[k], 1, strlen(argv[k]) + 1, f) == strlen(argv[k]) + 1);
		KT_EQ(fclose(f), 0);
		snprintf(cmd, sizeof cmd, "xargs -0 -a %s sh -c '\"$0\" \"$@\"'", path);
		char *native = native_out(cmd), *out;
		KT_EQ(run(progs[i].prog, argv, NULL, &out, NULL), 0);
		if (strcmp(out, native))
			fprintf(stderr, "  %s natively:\n%s  as a μprocess:\n%s", progs[i].prog, native,
				out);
		KT_CHECK(strcmp(out, native) == 0 && strlen(out) > 8);
		free(out);
		free(native);
	}
	/* children that write the memory they share in place, then crash,
	 * exit, exec or write: the parent's memory is its own again */
	probe_like_native("fork-memory", NULL);
	KT_CHECK(bg_pid("/usr/bin/dash", "") > 4194304);
	KT_CHECK(bg_pid("/bin/bash", "") > 4194304);
	/* more than 8 MiB written (a 12 MB variable): a real fork at once */
	KT_CHECK(bg_pid("/bin/bash", "x=$(printf '%12000000s' .); ") < 4194304);
	KT_EQ(setenv("KARUI_UPROC_FORK", "real", 1), 0);
	KT_CHECK(bg_pid("/usr/bin/dash", "") < 4194304);
	KT_EQ(unsetenv("KARUI_UPROC_FORK"), 0);
	snprintf(cmd, sizeof cmd, "rm -r %s", dir);
	KT_EQ(system(cmd), 0);
	KT_EQ(kr_fini(), 0);
}

/* ---- threads ---- */

static int run_tprobe(const char *mode, const char *arg, const char *arg2, char **out)
{
	char *argv[] = {"uthread_probe", (char *)mode, (char *)arg, (char *)arg2, NULL};
	return run(tprobe, argv, NULL, out, NULL);
}

/* PROG MODE (argv[0] NAME) says as a μprocess, on 1 VP and on 2, what it
 * says natively, which holds each of `must` (NULL-ended). */
static void like_native_on_1_and_2_vps(const char *prog, const char *name, const char *mode,
			      const char *const *must)
{
	char cmd[4200], *out, *native = NULL;
	for (unsigned vps = 1; vps <= 2; vps++) {
		start(vps);
		need_uprocs();
		if (!native) {
			snprintf(cmd, sizeof cmd, "%s %s", prog, mode);
			native = native_out(cmd);
			for (const char *const *m = must; *m; m++)
				KT_CHECK(strstr(native, *m));
		}
		char *argv[] = {(char *)name, (char *)mode, NULL};
		KT_EQ(run(prog, argv, NULL, &out, NULL), 0);
		if (strcmp(out, native))
			fprintf(stderr, "  native:\n%s  as a μprocess (%u VPs):\n%s", native, vps, out);
		KT_CHECK(strcmp(out, native) == 0);
		free(out);
		KT_EQ(kr_fini(), 0);
	}
	free(native);
}

/* std::thread, mutexes, condition variables, std::async, thread_local,
 * barriers, tids, and signals to a thread and to the process: what a
 * C++ program with threads prints natively, on 1 VP and on 2. */
static void threads_run_as_natively(void)
{
	like_native_on_1_and_2_vps(tprobe, "uthread_probe", "run",
			  (const char *const[]){"sum 80000\n", "handled in the thread 1\n", NULL});
}

/* exit in a thread ends the μprocess (its atexit handlers run, the main
 * thread's join is cut short); a crash in a thread ends it by SIGSEGV;
 * the main thread may end first (pthread_exit), the μprocess then ends
 * with its last thread; an exec in the main thread ends the others, and
 * one in another thread too, the first thread taking it over.  The host
 * goes on. */
static void a_thread_ends_itself_or_its_uproc(void)
{
	start(2);
	need_uprocs();
	char *out;
	KT_EQ(run_tprobe("exit-in-thread", "5", NULL, &out), 5);
	KT_CHECK(strcmp(out, "bye\n") == 0);
	free(out);
	KT_EQ(run_tprobe("crash-in-thread", NULL, NULL, &out), 128 + SIGSEGV);
	free(out);
	KT_EQ(run_tprobe("main-exits-first", NULL, NULL, &out), 0);
	KT_CHECK(strcmp(out, "worker done\n") == 0);
	free(out);
	KT_EQ(run_tprobe("exec", "/bin/echo", "hi", &out), 0);
	KT_CHECK(strcmp(out, "hi\n") == 0);
	free(out);
	KT_EQ(run_tprobe("exec-in-thread", "/bin/echo", NULL, &out), 0);
	KT_CHECK(strcmp(out, "x\n") == 0);
	free(out);
	/* a thread on a stack that is not mapped (a raw clone, from a call
	 * site made hot by other calls): SIGSEGV, as natively */
	KT_EQ(run_tprobe("bad-stack", NULL, NULL, &out), 128 + SIGSEGV);
	free(out);
	/* futex and clone with bad arguments: the errors they give natively */
	char cmd[4200];
	snprintf(cmd, sizeof cmd, "%s abuse 2>/dev/null", tprobe);
	char *native = native_out(cmd);
	KT_EQ(run_tprobe("abuse", NULL, NULL, &out), 0);
	if (strcmp(out, native))
		fprintf(stderr, "  native:\n%s  as a μprocess:\n%s", native, out);
	KT_CHECK(strcmp(out, native) == 0 && strstr(out, "wait on NULL: EFAULT"));
	free(out);
	free(native);
	need_uprocs();
	KT_EQ(kr_fini(), 0);
}

/* Threads that compute without system calls, on every VP: a kill ends
 * them all, and the μprocess. */
static void a_kill_ends_every_thread_of_a_uproc_that_computes(void)
{
	start(2);
	need_uprocs();
	for (int sig = SIGTERM; sig; sig = sig == SIGTERM ? SIGKILL : 0) {
		char *argv[] = {"uthread_probe", "spin", "3", NULL};
		kr_upipe *in, *out;
		kr_uproc *up = spawn_piped(tprobe, argv, &in, &out);
		KT_CHECK(strcmp(line_of(out), "spinning") == 0);
		KT_EQ(kr_mp_sleep_for(20000000), 0);
		KT_EQ(kr_uproc_kill(up, sig), 0);
		int st = -1;
		KT_EQ(kr_uproc_wait(up, &st), 0);
		KT_EQ(st, 128 + sig);
		KT_EQ(kr_upipe_close(in, KR_UPIPE_WRITE), 0);
		KT_EQ(kr_upipe_close(out, KR_UPIPE_READ), 0);
	}
	need_uprocs();
	KT_EQ(kr_fini(), 0);
}

/* Call sites that threads run on two VPs at once are rewritten under
 * them (rewrite.c: poke_live): every call meanwhile gives the right
 * result and keeps the registers, and the sites end rewritten, the one
 * with no slot in reach through the mov before it. */
static void a_site_is_rewritten_while_threads_run_it(void)
{
	start(2);
	need_uprocs();
	char *out = NULL;
	KT_EQ(run_tprobe("live-rewrite", NULL, NULL, &out), 0);
	KT_CHECK(out && strcmp(out, "ok\nrewritten\nrewritten\n") == 0);
	free(out);
	KT_EQ(kr_fini(), 0);
}

/* A thread uses an fd while another closes it and makes it again, 20000
 * times: each call finds the file or EBADF, and nothing of karui reads a
 * file freed under it (fd.c: a shared table's lookups hold references). */
static void a_file_closed_under_another_threads_call(void)
{
	start(2);
	need_uprocs();
	char *out = NULL;
	KT_EQ(run_tprobe("close-race", NULL, NULL, &out), 0);
	KT_CHECK(out && strcmp(out, "survived\n") == 0);
	free(out);
	KT_EQ(kr_fini(), 0);
}

/* Debian's threaded compressors and GNU sort, each with two threads of
 * work, write what they write natively, byte for byte. */
static void threaded_programs_give_what_they_give_natively(void)
{
	start(2);
	need_uprocs();
	char dir[] = "/tmp/karui-uthr-XXXXXX", in[128];
	KT_CHECK(mkdtemp(dir));
	snprintf(in, sizeof in, "%s/in", dir);
	FILE *f = fopen(in, "w");
	KT_CHECK(f);
	uint32_t x = 12345;
	for (int i = 0; i < 60000; i++) { /* 1.5 MB of lines in no order */
		x = x * 1103515245u + 12345u;
		fprintf(f, "line %08x of the input, number %d\n", x, i);
	}
	KT_EQ(fclose(f), 0);
	const char *progs[][8] = {
		{"/usr/bin/xz", "-T2", "--block-size=256KiB", "-c", in},
		{"/usr/bin/zstd", "-q", "-T2", "-B262144", "-c", in},
		{"/usr/bin/pigz", "-p", "2", "-b", "128", "-c", in},
		{"/usr/bin/sort", "--parallel=2", "-S", "100M", in},
	};
	for (unsigned i = 0; i < sizeof progs / sizeof *progs; i++) {
		if (access(progs[i][0], X_OK)) {
			fprintf(stderr, "  %s: not installed, skipped\n", progs[i][0]);
			continue;
		}
		char cmd[4200] = "", nat[160], mine[160];
		snprintf(nat, sizeof nat, "%s/native", dir);
		snprintf(mine, sizeof mine, "%s/uproc", dir);
		for (int k = 0; progs[i][k]; k++)
			snprintf(cmd + strlen(cmd), sizeof cmd - strlen(cmd), "%s ", progs[i][k]);
		snprintf(cmd + strlen(cmd), sizeof cmd - strlen(cmd), "> %s", nat);
		KT_EQ(system(cmd), 0);
		int fd = open(mine, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
		KT_CHECK(fd >= 0);
		kr_uproc_attr a;
		KT_EQ(kr_uproc_attr_init(&a), 0);
		KT_EQ(kr_uproc_attr_fd_host(&a, 1, fd), 0);
		kr_uproc *up;
		KT_EQ(kr_uproc_spawn(&up, progs[i][0], (char *const *)progs[i], &a), 0);
		int st = -1;
		KT_EQ(kr_uproc_wait(up, &st), 0);
		KT_EQ(st, 0);
		KT_EQ(close(fd), 0);
		snprintf(cmd, sizeof cmd, "cmp -s %s %s && test $(stat -c %%s %s) -gt 1000", nat, mine,
			 mine);
		if (system(cmd))
			fprintf(stderr, "  %s: not what it writes natively\n", progs[i][0]);
		KT_EQ(system(cmd), 0);
		unlink(nat);
		unlink(mine);
	}
	KT_EQ(kr_fini(), 0);
	unlink(in);
	rmdir(dir);
}

/* ---- futexes ---- */

/* futex_probe MODE: as natively, which holds `must`. */
static void fprobe_like_native(const char *mode, const char *must)
{
	like_native_on_1_and_2_vps(fprobe, "futex_probe", mode, (const char *const[]){must, NULL});
}

/* FUTEX_WAKE_OP with each op (SET, ADD, OR, ANDN, XOR, with and without
 * FUTEX_OP_OPARG_SHIFT) and each comparison, a waiter on each word: the
 * word's new value and who is woken; bad ops, comparisons and addresses:
 * the kernel's errors. */
static void wake_op_does_what_the_kernels_does(void)
{
	fprobe_like_native("wakeop", "XOR<< 31 cmp 5 0: 0x1 -> 0x80000001, woke 2, left 0 0\n");
}

/* glibc's PTHREAD_PRIO_INHERIT mutexes, normal, recursive, errorcheck and
 * robust, under 4 threads (a counter that counts every increment), held
 * by another (trylock, timedlock, clocklock), by itself, unlocked by one
 * that does not hold them, their owner ended (EOWNERDEAD, ESRCH), with a
 * condition variable; the raw PI operations and their errors. */
static void pi_mutexes_of_every_kind_work_as_natively(void)
{
	fprobe_like_native("pi", "robust: 12000 of 12000\n");
}

/* FUTEX_WAIT_REQUEUE_PI and FUTEX_CMP_REQUEUE_PI: the waiter given the
 * free PI word at once, two requeued to a held one and handed it in turn,
 * a timeout, and the errors (a plain wake or requeue meeting them). */
static void requeue_pi_hands_the_pi_word_over_as_natively(void)
{
	fprobe_like_native("requeue-pi", "requeue_pi, held: 2, mine+waiters\n");
}

/* A program that is not position-independent execs itself from a thread
 * other than the first: its new image cannot have the address the old one
 * holds, so it runs as a process the μprocess stands for, once the other
 * threads have ended, as natively: the same output, one thread. */
static void a_non_pie_program_execs_from_its_second_thread(void)
{
	start(2);
	need_uprocs();
	if (!fprobe_nopie)
		KT_SKIP("no futex_probe-nopie: the toolchain makes no program that is not a PIE");
	KT_EQ(kr_uproc_keep(0), 0); /* a kept image would hold the address */
	char cmd[9000];
	snprintf(cmd, sizeof cmd, "%s exec-thread %s", fprobe_nopie, fprobe_nopie);
	char *native = native_out(cmd), *out;
	KT_CHECK(strcmp(native, "before\nhello: from a thread (1 thread)\n") == 0);
	for (int i = 0; i < 3; i++) {
		char *argv[] = {"futex_probe-nopie", "exec-thread", (char *)fprobe_nopie, NULL};
		KT_EQ(run(fprobe_nopie, argv, NULL, &out, NULL), 0);
		if (strcmp(out, native))
			fprintf(stderr, "  native:\n%s  as a μprocess:\n%s", native, out);
		KT_CHECK(strcmp(out, native) == 0);
		free(out);
	}
	free(native);
	KT_EQ(kr_fini(), 0);
}

int main(int argc, char **argv)
{
	static char self[4096], tself[4096], fself[4096], fnself[4096];
	probe = kt_beside_me(self, sizeof self, "uproc_probe");
	tprobe = kt_beside_me(tself, sizeof tself, "uthread_probe");
	fprobe = kt_beside_me(fself, sizeof fself, "futex_probe");
	fprobe_nopie = kt_beside_me(fnself, sizeof fnself, "futex_probe-nopie");
	if (access(fprobe_nopie, X_OK))
		fprobe_nopie = NULL;
	/* no test meets what an earlier run learnt (src/image/cache.c), but
	 * the one that makes a cache directory of its own */
	setenv("KARUI_CACHE_DIR", "", 1);
	kt_args(argc, argv);
	KT_RUN(cat_copies_its_stdin_pipe_to_its_stdout_pipe);
	KT_RUN(exit_status_is_what_a_shell_shows);
	KT_RUN(a_crash_ends_its_uproc_alone);
	KT_RUN(a_crash_ends_its_uproc_alone_with_domains_too);
	KT_RUN(each_uproc_sees_a_pid_of_its_own);
	KT_RUN(cwd_umask_and_environment_are_the_uprocs_own);
	KT_RUN(identity_changes_fail_with_eperm);
	KT_RUN(fork_gives_a_real_child);
	KT_RUN(a_fork_then_exec_runs_in_place);
	KT_RUN(scripts_and_setuid_programs_are_not_loaded);
	KT_RUN(a_program_with_file_capabilities_is_not_loaded);
	KT_RUN(too_many_arguments_are_refused);
	KT_RUN(writing_to_a_pipe_without_readers_ends_by_sigpipe);
	KT_RUN(a_pipeline_of_two_uprocs_gives_what_the_programs_give);
	KT_RUN(a_static_pie_program_runs_too);
	KT_RUN(a_kept_image_starts_as_the_program_did);
	KT_RUN(its_maps_list_its_own_mappings);
	KT_RUN(a_kept_image_keeps_its_read_only_file_mappings);
	KT_RUN(kept_images_serve_runs_at_once);
	KT_RUN(a_host_pipe_keeps_its_blocking_mode_on_both_back_ends);
	KT_RUN(a_vp_started_by_an_armed_vp_runs_uprocs);
	KT_RUN(a_kill_ends_a_uproc_wherever_it_waits);
	KT_RUN(a_kill_ends_a_wait_in_the_kernel);
	KT_RUN(a_kill_honours_what_the_uproc_set);
	KT_RUN(a_bad_pointer_is_efault_for_that_call_alone);
	KT_RUN(a_pipe_read_makes_private_only_what_it_fills);
	KT_RUN(dev_stdin_and_proc_self_fd_name_its_own_fds);
	KT_RUN(timed_waits_alarms_and_altstacks_behave_as_natively);
	KT_RUN(pipelines_on_two_vps_keep_each_vps_signal_state);
	KT_RUN(cpuid_answers_are_the_processors);
	KT_RUN(hot_call_sites_are_rewritten_and_keep_every_register);
	KT_RUN(a_site_that_would_cost_a_page_is_rewritten_at_its_third_trap);
	KT_RUN(sites_hot_in_one_uproc_are_rewritten_in_the_next_at_once);
	KT_RUN(ld_sos_patched_pages_are_the_files_again_once_it_hands_over);
	KT_RUN(a_waiting_uprocs_stack_holds_what_a_process_stack_does);
	KT_RUN(with_rewriting_off_every_call_traps);
	KT_RUN(a_child_of_fork_runs_uprocs_of_its_own);
	KT_RUN(a_fork_childs_rewrites_land_in_its_own_memory);
	KT_RUN(a_later_process_starts_from_what_an_earlier_one_learnt);
	KT_RUN(a_thousand_cats_wait_on_their_stdin_at_once);
	KT_RUN(ten_thousand_runs_leave_fd_count_and_rss_flat);
	KT_RUN(malformed_programs_are_refused_or_run_never_crash_the_host);
	KT_RUN(a_malformed_interpreter_is_refused_or_runs_never_crashes_the_host);
	KT_RUN(sockets_and_the_kernels_other_fds_behave_as_natively);
	KT_RUN(a_tcp_server_and_client_wait_in_their_microprocesses_alone);
	KT_RUN(an_eventfd_passed_between_uprocs_wakes_its_reader);
	KT_RUN(a_kill_ends_a_wait_on_a_socket_or_an_event_fd);
	KT_RUN(ls_l_lists_a_directory_as_natively);
	KT_RUN(a_program_that_is_not_pie_runs_at_its_address_one_at_a_time);
	KT_RUN(curl_fetches_a_page_from_a_local_server);
	KT_RUN(wget_fetches_a_page_from_a_local_server);
	KT_RUN(a_uproc_reaches_no_fd_but_its_own);
	KT_RUN(exec_replaces_the_image_keeping_pid_and_fds);
	KT_RUN(system_popen_and_posix_spawn_run_their_children_as_uprocs);
	KT_RUN(a_vfork_child_that_returns_never_crashes_the_host);
	KT_RUN(a_thousand_execs_leave_fd_count_and_rss_flat);
	KT_RUN(make_builds_a_tiny_makefile);
	KT_RUN(make_j2_compiles_a_c_project);
	KT_RUN(python_subprocess_runs_echo);
	KT_RUN(handlers_run_as_natively);
	KT_RUN(a_fault_runs_the_handler_which_may_longjmp_out);
	KT_RUN(a_forged_signal_frame_ends_its_uproc_alone);
	KT_RUN(a_kill_reaches_a_uproc_that_makes_no_system_call);
	KT_RUN(a_storm_of_signals_loses_none_that_were_waited_for);
	KT_RUN(uprocs_signal_each_other_by_pid);
	KT_RUN(sigchld_runs_its_handler);
	KT_RUN(signalfd_reads_signals_as_natively);
	KT_RUN(threads_run_as_natively);
	KT_RUN(a_site_is_rewritten_while_threads_run_it);
	KT_RUN(a_file_closed_under_another_threads_call);
	KT_RUN(a_thread_ends_itself_or_its_uproc);
	KT_RUN(a_kill_ends_every_thread_of_a_uproc_that_computes);
	KT_RUN(threaded_programs_give_what_they_give_natively);
	KT_RUN(wake_op_does_what_the_kernels_does);
	KT_RUN(pi_mutexes_of_every_kind_work_as_natively);
	KT_RUN(requeue_pi_hands_the_pi_word_over_as_natively);
	KT_RUN(a_non_pie_program_execs_from_its_second_thread);
	return kt_finish();
}
