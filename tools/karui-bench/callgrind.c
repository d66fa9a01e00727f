/*
 * karui-bench — one `karui-bench count` run under callgrind, read per
 * instruction: what the `instructions` experiment and `karui-bench locked`
 * count.
 *
 * Locked instructions are the atomic read-modify-writes of x86-64: every
 * instruction with a `lock` prefix, and `xchg` with a memory operand
 * (locked without one).  Valgrind turns each of them, and nothing else,
 * into one compare-and-swap of its intermediate code, and callgrind's
 * --collect-bus counts those as "Ge" events: one per execution, at the
 * instruction's address.  So the count needs no disassembly and no address
 * mapping, and repeats exactly like the instruction count.  (A seq_cst
 * fence is `lock or` with GCC: a locked instruction here.)
 *
 * Fences that are not locked (`mfence`) are no Ge event: they are found by
 * disassembling each object that ran code (objdump) and adding up the
 * executions at their addresses.  Callgrind's per-instruction output gives
 * addresses relative to each object's load bias, the addresses objdump
 * prints, so no load address is involved there either.
 *
 * The output is read uncompressed (--compress-strings=no,
 * --compress-pos=no): every cost line is "address line Ir [Ge]", and the
 * line after a "calls=" line is a call's inclusive cost, which is skipped.
 *
 * Rejected: disassembling every object and classifying each executed
 * address (the same figures, checked against Ge at every address of a
 * channel ping-pong run, with a second decoder to keep up to date);
 * valgrind's lackey, whose counts do not tell locked accesses apart.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "exp.h"

/* ---- the mfence addresses of an object, disassembled once ---- */

struct fences {
	char *path;
	unsigned long *addr; /* ascending, as objdump prints them */
	size_t n;
	int known;           /* 0: objdump could not read the object */
};
static struct fences *fcache;
static size_t nfcache;

static const struct fences *fences_of(const char *path)
{
	for (size_t i = 0; i < nfcache; i++)
		if (!strcmp(fcache[i].path, path))
			return &fcache[i];
	struct fences *c = realloc(fcache, (nfcache + 1) * sizeof *fcache);
	if (!c)
		return NULL;
	fcache = c;
	struct fences *f = &fcache[nfcache];
	*f = (struct fences){strdup(path), NULL, 0, 0};
	if (!f->path)
		return NULL;
	nfcache++;
	char cmd[PATH_MAX + 64];
	if (path[0] != '/' || strchr(path, '\'') || access(path, R_OK) != 0)
		return f; /* "???", [vdso] and the like */
	snprintf(cmd, sizeof cmd, "objdump -d --no-show-raw-insn '%s' 2>/dev/null", path);
	FILE *p = popen(cmd, "r");
	if (!p)
		return f;
	char line[512], mnem[16];
	unsigned long a;
	size_t cap = 0;
	while (fgets(line, sizeof line, p)) {
		if (sscanf(line, " %lx:\t%15s", &a, mnem) != 2 || strcmp(mnem, "mfence"))
			continue;
		if (f->n == cap) {
			cap = cap ? 2 * cap : 16;
			unsigned long *v = realloc(f->addr, cap * sizeof *v);
			if (!v)
				break;
			f->addr = v;
		}
		f->addr[f->n++] = a;
	}
	f->known = pclose(p) == 0;
	return f;
}

static int is_fence(const struct fences *f, unsigned long a)
{
	size_t lo = 0, hi = f ? f->n : 0;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (f->addr[mid] == a)
			return 1;
		if (f->addr[mid] < a)
			lo = mid + 1;
		else
			hi = mid;
	}
	return 0;
}

/* ---- one run ---- */

static kb_cg_site *site_at(kb_cg *r, const char *ob, const char *fn, unsigned long addr)
{
	for (size_t i = 0; i < r->nsite; i++)
		if (r->site[i].addr == addr && !strcmp(r->site[i].ob, ob))
			return &r->site[i];
	kb_cg_site *s = realloc(r->site, (r->nsite + 1) * sizeof *s);
	if (!s)
		return NULL;
	r->site = s;
	s = &r->site[r->nsite];
	*s = (kb_cg_site){strdup(ob), strdup(fn), addr, 0};
	if (!s->ob || !s->fn) {
		free(s->ob);
		free(s->fn);
		return NULL;
	}
	r->nsite++;
	return s;
}

/* Is callgrind's function name fn (a symbol, maybe with a context suffix
 * such as "'2") one of the comma-separated names in list? */
static int named(const char *list, const char *fn)
{
	size_t k = strcspn(fn, "'");
	for (const char *p = list; p && *p;) {
		size_t m = strcspn(p, ",");
		if (m == k && !strncmp(p, fn, k))
			return 1;
		p += m + (p[m] == ',');
	}
	return 0;
}

/* Read callgrind's output file, adding the instructions of the functions
 * that `apart` names up in r->apart; 0 or an errno code. */
static int parse(FILE *f, kb_cg *r, const char *apart)
{
	char line[PATH_MAX + 256], ob[sizeof line] = "???", fn[sizeof line] = "???";
	const struct fences *fc = NULL;
	int skip = 0, totals = 0, in_apart = 0;
	r->fences = 0;
	while (fgets(line, sizeof line, f)) {
		line[strcspn(line, "\n")] = 0;
		if (skip) { /* a call's inclusive cost */
			skip = 0;
			continue;
		}
		if (!strncmp(line, "ob=", 3)) {
			snprintf(ob, sizeof ob, "%s", line + 3);
			fc = fences_of(ob);
			if (r->fences >= 0 && (!fc || !fc->known) && ob[0] == '/')
				r->fences = -1; /* code ran where objdump cannot look */
		} else if (!strncmp(line, "fn=", 3)) {
			snprintf(fn, sizeof fn, "%s", line + 3);
			in_apart = named(apart, fn);
		} else if (!strncmp(line, "calls=", 6)) {
			skip = 1;
		} else if (!strncmp(line, "totals:", 7)) {
			totals = sscanf(line + 7, "%lf %lf", &r->ir, &r->locked) >= 1;
		} else if (line[0] == '+' || line[0] == '-' || line[0] == '*') {
			return EPROTO; /* a compressed position: not what was asked for */
		} else if (!strncmp(line, "0x", 2)) {
			char *e;
			unsigned long addr = strtoul(line, &e, 16);
			strtol(e, &e, 10); /* the source line */
			double ir = strtod(e, &e), ge = strtod(e, &e);
			if (ge > 0) {
				kb_cg_site *s = site_at(r, ob, fn, addr);
				if (!s)
					return ENOMEM;
				s->n += ge;
			}
			if (r->fences >= 0 && is_fence(fc, addr))
				r->fences += ir;
			if (in_apart)
				r->apart += ir;
		}
	}
	return totals ? 0 : EPROTO;
}

int kb_cg_run(kb_cg *r, const char *dir, const char *sys, const char *exp, const char *in,
	      int marks, const char *apart, long n)
{
	*r = (kb_cg){0};
	char out[] = "/tmp/karui-bench-cg.XXXXXX";
	int fd = mkstemp(out);
	if (fd < 0)
		return errno;
	close(fd);
	char cmd[PATH_MAX * 2];
	snprintf(cmd, sizeof cmd,
		 "valgrind --tool=callgrind --collect-bus=yes --dump-instr=yes "
		 "--compress-strings=no --compress-pos=no --callgrind-out-file=%s%s%s%s "
		 "%s/karui-bench count %s %s %ld >/dev/null 2>&1",
		 out, marks ? " --collect-atstart=no" : "", in ? " --toggle-collect=" : "",
		 in ? in : "", dir, sys, exp, n);
	int err = system(cmd) == 0 ? 0 : EIO;
	FILE *f = err ? NULL : fopen(out, "r");
	if (!err && !f)
		err = errno;
	if (f) {
		err = parse(f, r, apart);
		fclose(f);
	}
	unlink(out);
	if (err)
		kb_cg_free(r);
	return err;
}

void kb_cg_free(kb_cg *r)
{
	for (size_t i = 0; i < r->nsite; i++) {
		free(r->site[i].ob);
		free(r->site[i].fn);
	}
	free(r->site);
	*r = (kb_cg){0};
}

/* ---- where the locked instructions of one operation are ---- */

/* "file:line" with the file's path resolved, and relative to the source
 * tree when inside it */
static void print_loc(FILE *out, char *loc)
{
	char *colon = strrchr(loc, ':'), real[PATH_MAX];
	if (colon)
		*colon = 0;
	const char *path = realpath(loc, real) ? real : loc;
	size_t k = strlen(KB_SOURCE_DIR);
	fprintf(out, "%s%s%s", strncmp(path, KB_SOURCE_DIR, k) ? path : path + k,
		colon ? ":" : "", colon ? colon + 1 : "");
}

/* A C++ name without its parameter list (the first '(' outside <>). */
static void print_fn(FILE *out, const char *fn)
{
	int depth = 0;
	size_t i = 0;
	for (; fn[i] && (fn[i] != '(' || depth); i++)
		depth += (fn[i] == '<') - (fn[i] == '>');
	fprintf(out, "%.*s", (int)i, fn);
}

/* "fn file:line < caller file:line < ...", innermost first, from the
 * object's debug information; the symbol callgrind saw when there is none */
static void describe(FILE *out, const kb_cg_site *s)
{
	char cmd[PATH_MAX + 64], *fn = NULL, *loc = NULL;
	size_t fncap = 0, loccap = 0;
	int levels = 0;
	FILE *p = NULL;
	if (s->ob[0] == '/' && !strchr(s->ob, '\'')) {
		snprintf(cmd, sizeof cmd, "addr2line -C -f -i -e '%s' %#lx 2>/dev/null", s->ob,
			 s->addr);
		p = popen(cmd, "r");
	}
	while (p && getline(&fn, &fncap, p) > 0 && getline(&loc, &loccap, p) > 0) {
		fn[strcspn(fn, "\n")] = loc[strcspn(loc, "\n")] = 0;
		if (!strncmp(loc, "??", 2))
			break;
		char *d = strstr(loc, " (discriminator");
		if (d)
			*d = 0;
		fprintf(out, "%s", levels++ ? " < " : "");
		print_fn(out, fn);
		fprintf(out, " ");
		print_loc(out, loc);
	}
	if (p)
		pclose(p);
	free(fn);
	free(loc);
	if (!levels)
		print_fn(out, s->fn);
	const char *base = strrchr(s->ob, '/');
	fprintf(out, "  [%s %#lx]\n", base ? base + 1 : s->ob, s->addr);
}

struct placed {
	const kb_cg_site *s;
	double per; /* executions per operation */
};

static int by_place(const void *x, const void *y)
{
	const kb_cg_site *a = ((const struct placed *)x)->s, *b = ((const struct placed *)y)->s;
	int c = strcmp(a->ob, b->ob);
	return c ? c : (a->addr > b->addr) - (a->addr < b->addr);
}

void kb_cg_where(FILE *out, const kb_cg *a, const kb_cg *b, long n)
{
	struct placed *v = calloc(b->nsite ? b->nsite : 1, sizeof *v);
	size_t k = 0;
	for (size_t i = 0; v && i < b->nsite; i++) {
		double was = 0;
		for (size_t j = 0; j < a->nsite; j++)
			if (a->site[j].addr == b->site[i].addr && !strcmp(a->site[j].ob, b->site[i].ob))
				was = a->site[j].n;
		/* below 1 in 200 operations: set-up, not the operation */
		if ((b->site[i].n - was) / n >= 0.005)
			v[k++] = (struct placed){&b->site[i], (b->site[i].n - was) / n};
	}
	qsort(v, k, sizeof *v, by_place);
	for (size_t i = 0; i < k; i++) {
		fprintf(out, "%6.3g  ", v[i].per);
		describe(out, v[i].s);
	}
	free(v);
}
