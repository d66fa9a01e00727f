/*
 * karui image layer — what a process learns of its programs and of the
 * processor, kept on disk for the processes after it.
 *
 * A process's first μprocesses pay for what later ones find ready: ld.so's
 * cpuid plan (rewrite.c: a decode of every function that holds a cpuid),
 * the processor's cpuid answers (fast.c: each a hypervisor exit in a
 * virtual machine, several microseconds), and the call sites known per file
 * (rewrite.c: each traps until it is hot).  A karui-sh -c or a karui-run
 * would pay for all of them at every start.  So they are kept in the files
 * of a cache directory:
 *   cpuid          the answers, for one boot of the machine
 *   plan-DEV-INO   a file's cpuid plan
 *   sites-DEV-INO  a file's known call sites
 * in $KARUI_CACHE_DIR, else $XDG_CACHE_HOME/karui, else $HOME/.cache/karui
 * (made, mode 0700, at the first write); KARUI_CACHE_DIR set empty, or no
 * HOME, keeps nothing.
 *
 * Each file is a header (magic, version, key, payload length) and the
 * payload.  The key is the file's device, inode and modification time,
 * or the boot's id (/proc/sys/kernel/random/boot_id), so a program
 * replaced or changed, or a reboot, makes the record a stranger's.  A
 * record is believed only if this user owns it, nobody else may write
 * it, its header matches and its length is whole; and even then every
 * entry is checked before use as if karui had just learnt it (rewrite.c:
 * a site still holds the instruction it names, a slot is still padding;
 * fast.c's answers are taken only if the processor still gives leaf 0 and
 * leaf 1's signature and features).  A write goes to a temporary file
 * renamed over the record: a reader sees a whole record, and of two
 * processes writing at once one's record stays.
 *
 * Rejected: one file for everything (every process would rewrite the
 * records of programs it never ran); a shared directory such as /tmp
 * (another user could plant records).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "uproc.h"

#define MAGIC "karui-c\1"

struct hdr {
	char magic[8];
	uint64_t key[3];
	uint64_t len;
};

static char dir[PATH_MAX]; /* "": nothing is kept */

static uint64_t boot[3];
static int boot_known;

/* The boot's id (/proc/sys/kernel/random/boot_id: 32 hex digits and
 * dashes) as a key; 0: unknown. */
static int boot_of(uint64_t key[3])
{
	char id[64] = "";
	int fd = open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC);
	ssize_t n = fd < 0 ? -1 : read(fd, id, sizeof id - 1);
	if (fd >= 0)
		close(fd);
	uint64_t v[2] = {0, 0};
	unsigned d = 0;
	for (ssize_t i = 0; i < n && d < 32; i++) {
		char c = id[i];
		unsigned x = c >= '0' && c <= '9' ? (unsigned)(c - '0')
			   : c >= 'a' && c <= 'f' ? (unsigned)(c - 'a' + 10) : 16;
		if (x < 16) {
			v[d / 16] = v[d / 16] << 4 | x;
			d++;
		}
	}
	key[0] = v[0];
	key[1] = v[1];
	key[2] = 0;
	return d == 32;
}

void kr__cache_init(void)
{
	const char *e = getenv("KARUI_CACHE_DIR"), *x = getenv("XDG_CACHE_HOME"),
		   *h = getenv("HOME");
	int n = -1;
	if (e)
		n = snprintf(dir, sizeof dir, "%s", e);
	else if (x && x[0] == '/')
		n = snprintf(dir, sizeof dir, "%s/karui", x);
	else if (h && h[0] == '/')
		n = snprintf(dir, sizeof dir, "%s/.cache/karui", h);
	if (n < 0 || (size_t)n >= sizeof dir)
		dir[0] = 0;
	boot_known = dir[0] && boot_of(boot);
}

static int path_of(char *out, size_t n, const char *name)
{
	int r = snprintf(out, n, "%s/%s", dir, name);
	return dir[0] && r > 0 && (size_t)r < n;
}

long kr__cache_read(const char *name, const uint64_t key[3], void *buf, size_t cap)
{
	char path[PATH_MAX];
	if (!path_of(path, sizeof path, name))
		return -1;
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return -1;
	struct stat st;
	struct hdr h;
	long got = -1;
	if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == geteuid() &&
	    !(st.st_mode & 022) && (size_t)st.st_size >= sizeof h &&
	    (size_t)st.st_size - sizeof h <= cap && read(fd, &h, sizeof h) == (ssize_t)sizeof h &&
	    !memcmp(h.magic, MAGIC, sizeof h.magic) && !memcmp(h.key, key, sizeof h.key) &&
	    h.len == (uint64_t)st.st_size - sizeof h &&
	    read(fd, buf, (size_t)h.len) == (ssize_t)h.len)
		got = (long)h.len;
	close(fd);
	return got;
}

void kr__cache_write(const char *name, const uint64_t key[3], const void *buf, size_t len)
{
	char path[PATH_MAX], tmp[PATH_MAX + 8];
	if (!path_of(path, sizeof path, name) ||
	    snprintf(tmp, sizeof tmp, "%s.XXXXXX", path) >= (int)sizeof tmp)
		return;
	int fd = mkostemp(tmp, O_CLOEXEC);
	if (fd < 0 && errno == ENOENT) {
		/* the directory, and its parent (~/.cache) if need be */
		char up[PATH_MAX];
		memcpy(up, dir, sizeof up);
		char *slash = strrchr(up, '/');
		if (mkdir(dir, 0700) && errno == ENOENT && slash && slash != up) {
			*slash = 0;
			if (mkdir(up, 0700) == 0)
				mkdir(dir, 0700);
		}
		snprintf(tmp, sizeof tmp, "%s.XXXXXX", path); /* mkostemp wrote on it */
		fd = mkostemp(tmp, O_CLOEXEC);
	}
	if (fd < 0)
		return;
	struct hdr h = {.len = len};
	memcpy(h.magic, MAGIC, sizeof h.magic);
	memcpy(h.key, key, sizeof h.key);
	int ok = write(fd, &h, sizeof h) == (ssize_t)sizeof h &&
		 write(fd, buf, len) == (ssize_t)len;
	if (close(fd) || !ok || rename(tmp, path))
		unlink(tmp);
}

/* A file's record: its name, kind-DEV-INO, and its key. */
void kr__cache_file(char name[64], uint64_t key[3], const char *kind,
		    const struct kr__file_id *f)
{
	snprintf(name, 64, "%s-%llx-%llx", kind, (unsigned long long)f->dev,
		 (unsigned long long)f->ino);
	key[0] = (uint64_t)f->dev;
	key[1] = (uint64_t)f->ino;
	key[2] = (uint64_t)f->mtime_ns;
}

/* ---- cpuid answers (fast.c's table) ---- */

static unsigned cpuid_saved; /* entries the record on disk holds */

static int same4(const uint32_t *a, const uint32_t *b, unsigned mask)
{
	for (unsigned i = 0; i < 4; i++)
		if ((mask >> i & 1) && a[i] != b[i])
			return 0;
	return 1;
}

void kr__cache_cpuid_load(void)
{
	static struct kr__cpuid_ent v[KR__CPUID_MAX];
	long n = boot_known ? kr__cache_read("cpuid", boot, v, sizeof v) : -1;
	if (n <= 0 || n % (long)sizeof *v)
		return;
	unsigned cnt = (unsigned)(n / (long)sizeof *v), seen = 0;
	/* the processor's word on leaf 0 (vendor, highest leaf) and leaf 1
	 * (signature, features; not ebx, which names the asking CPU) */
	for (unsigned i = 0; i < cnt; i++) {
		if (v[i].sub || v[i].leaf > 1)
			continue;
		uint32_t r[4];
		__asm__ volatile("cpuid" : "=a"(r[0]), "=b"(r[1]), "=c"(r[2]), "=d"(r[3])
				 : "0"(v[i].leaf), "2"(0));
		if (!same4(r, v[i].r, v[i].leaf ? 0xd : 0xf))
			return;
		seen |= 1u << v[i].leaf;
	}
	if (seen != 3)
		return;
	for (unsigned i = 0; i < cnt; i++)
		kr__cpuid_put(&v[i]);
	__atomic_store_n(&cpuid_saved, cnt, __ATOMIC_RELAXED);
}

/* At a μprocess's end, on any VP: one saver at a time, and a saver that
 * finds another at work leaves it to that one. */
void kr__cache_cpuid_save(void)
{
	static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
	static struct kr__cpuid_ent v[KR__CPUID_MAX];
	if (!boot_known || __atomic_load_n(&kr__cpuid_kept, __ATOMIC_RELAXED) <=
				   __atomic_load_n(&cpuid_saved, __ATOMIC_RELAXED) ||
	    pthread_mutex_trylock(&lock))
		return; /* (the common end: nothing learnt since) */
	unsigned n = kr__cpuid_export(v, KR__CPUID_MAX);
	if (n > cpuid_saved) {
		__atomic_store_n(&cpuid_saved, n, __ATOMIC_RELAXED);
		kr__cache_write("cpuid", boot, v, n * sizeof *v);
	}
	pthread_mutex_unlock(&lock);
}
