/*
 * karui-sh's word expansion (XCU 2.6): tilde expansion, parameter
 * expansion, field splitting, pathname expansion and quote removal, in
 * that order, over a word as the lexer kept it.
 *
 * One pass over the word builds its characters, each tagged with how it
 * came: QUOTED (inside quotes or after a backslash: taken as it is),
 * PLAIN (unquoted text of the word: a glob character there is active)
 * or EXPANDED (an unquoted expansion's result: split at $IFS, and its
 * glob characters active).  Two marks take no character: QMARK says
 * "quotes were here", so that "" or '' makes a field although it adds
 * nothing, and BREAK ends a field ("$@": one field per parameter).
 * Field splitting then reads only the tags: it never has to re-parse
 * quotes, and a quoted or literal IFS character never splits.
 *
 * Splitting follows POSIX: IFS white space (space, tab, newline in
 * $IFS) around a field is dropped, and a run of it delimits once; every
 * other IFS character delimits, so "a::b" with IFS=: is a, "", b; an
 * empty $IFS splits nothing; an unset one is " \t\n".  A field with an
 * active *, ? or [ is a glob(3) pattern, its quoted characters escaped
 * with a backslash; no match leaves the field as it is, and . and .. are
 * never matched (bash's defaults).
 *
 * Parameters: $NAME and ${NAME}, $? $$ $# $0..$9 ${N} $@ $* ($! is
 * empty: karui-sh starts no background jobs).  Any other ${...} form is
 * bash's "bad substitution", which ends the command (status 1).
 */
#include <glob.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "shell.h"

enum tag { QUOTED, PLAIN, EXPANDED, QMARK, BREAK };

struct xword {
	char *c;
	unsigned char *tag;
	size_t n, cap;
};

static void put(struct xword *x, char c, enum tag t)
{
	if (x->n == x->cap) {
		x->cap = x->cap ? 2 * x->cap : 64;
		x->c = ksh_xrealloc(x->c, x->cap);
		x->tag = ksh_xrealloc(x->tag, x->cap);
	}
	x->c[x->n] = c;
	x->tag[x->n++] = (unsigned char)t;
}

static void put_str(struct xword *x, const char *s, enum tag t)
{
	for (; s && *s; s++)
		put(x, *s, t);
}

struct walk {
	struct shell *sh;
	const char *w;
	size_t i, len;
	bool dq;          /* inside "..." */
	bool dq_at_empty; /* this "..." held "$@" with no parameters */
	bool fields;      /* an ordinary word, not an assignment's value */
	struct xword x;
};

static const char *positional(const struct shell *sh, long n)
{
	if (n == 0)
		return sh->arg0;
	return n <= sh->nargs ? sh->args[n - 1] : NULL;
}

/* $@ and $*: unquoted, each parameter is a field of its own, split
 * further; "$@" keeps each whole; "$*" joins them with $IFS's first
 * character. */
static void all_params(struct walk *k, bool at)
{
	struct shell *sh = k->sh;
	if (!k->dq || at) {
		if (k->dq && sh->nargs == 0)
			k->dq_at_empty = true;
		for (int a = 0; a < sh->nargs; a++) {
			if (a)
				put(&k->x, 0, BREAK);
			if (k->dq)
				put(&k->x, 0, QMARK);
			put_str(&k->x, sh->args[a], k->dq ? QUOTED : EXPANDED);
		}
		return;
	}
	const char *ifs = ksh_var_get(sh, "IFS");
	char sep = ifs ? ifs[0] : ' ';
	for (int a = 0; a < sh->nargs; a++) {
		if (a && sep)
			put(&k->x, sep, QUOTED);
		put_str(&k->x, sh->args[a], QUOTED);
	}
}

/* One parameter by name (len chars at name); false: no such form. */
static bool param(struct walk *k, const char *name, size_t len)
{
	struct shell *sh = k->sh;
	enum tag t = k->dq ? QUOTED : EXPANDED;
	char num[24];
	if (len == 1 && strchr("?$#!@*", name[0])) {
		switch (name[0]) {
		case '?': snprintf(num, sizeof num, "%d", sh->status); break;
		case '$': snprintf(num, sizeof num, "%ld", (long)getpid()); break;
		case '#': snprintf(num, sizeof num, "%d", sh->nargs); break;
		case '!': num[0] = 0; break;
		default: all_params(k, name[0] == '@'); return true;
		}
		put_str(&k->x, num, t);
		return true;
	}
	if (len > 0 && strspn(name, "0123456789") >= len) {
		long n = 0;
		for (size_t i = 0; i < len && n < 1000000; i++)
			n = n * 10 + (name[i] - '0');
		put_str(&k->x, positional(sh, n), t);
		return true;
	}
	if (!ksh_valid_name(name, len))
		return false;
	char *nm = ksh_xmalloc(len + 1);
	memcpy(nm, name, len);
	nm[len] = 0;
	put_str(&k->x, ksh_var_get(sh, nm), t);
	free(nm);
	return true;
}

/* At a $: the parameter it starts, or a literal $.  -1: bad substitution. */
static int dollar(struct walk *k)
{
	const char *w = k->w;
	size_t j = k->i + 1;
	if (j < k->len && w[j] == '{') {
		const char *end = memchr(w + j, '}', k->len - j);
		size_t n = end ? (size_t)(end - w) - j - 1 : 0;
		if (!end || !param(k, w + j + 1, n)) {
			size_t shown = end ? (size_t)(end - w) + 1 - k->i : k->len - k->i;
			ksh_say(k->sh, 2, "%.*s: bad substitution", (int)shown, w + k->i);
			return -1;
		}
		k->i = (size_t)(end - w) + 1;
		return 0;
	}
	size_t n = 0;
	if (j < k->len && ksh_valid_name(w + j, 1)) {
		while (j + n < k->len && ksh_valid_name(w + j, n + 1))
			n++;
	} else if (j < k->len && (strchr("?$#!@*", w[j]) || (w[j] >= '0' && w[j] <= '9'))) {
		n = 1;
	}
	if (n == 0 || !param(k, w + j, n)) {
		put(&k->x, '$', k->dq ? QUOTED : PLAIN);
		k->i = j;
		return 0;
	}
	k->i = j + n;
	return 0;
}

/* ~, ~/..., ~user: the home directory, when nothing in the prefix is
 * quoted.  The prefix ends at a / (in an assignment's value, at a : too). */
static bool tilde(struct walk *k)
{
	const char *w = k->w + k->i;
	size_t n = 1;
	while (k->i + n < k->len && w[n] != '/' && (k->fields || w[n] != ':'))
		n++;
	for (size_t i = 1; i < n; i++)
		if (strchr("'\"\\$`", w[i]))
			return false;
	const char *home = NULL;
	if (n == 1) {
		home = ksh_var_get(k->sh, "HOME");
		if (!home) {
			struct passwd *pw = getpwuid(getuid());
			home = pw ? pw->pw_dir : NULL;
		}
	} else {
		char user[256];
		if (n - 1 >= sizeof user)
			return false;
		memcpy(user, w + 1, n - 1);
		user[n - 1] = 0;
		struct passwd *pw = getpwnam(user);
		home = pw ? pw->pw_dir : NULL;
	}
	if (!home)
		return false;
	put(&k->x, 0, QMARK);
	put_str(&k->x, home, QUOTED);
	k->i += n;
	return true;
}

/* The word, tagged.  fields: an ordinary word (tilde at its start
 * only); else an assignment's value (after each unquoted : too). */
static int walk(struct walk *k)
{
	bool fields = k->fields;
	const char *w = k->w;
	size_t dq_start = 0;
	while (k->i < k->len) {
		char c = w[k->i];
		bool at_start = k->i == 0 || (!fields && !k->dq && w[k->i - 1] == ':');
		if (c == '$') {
			if (dollar(k) < 0)
				return -1;
		} else if (k->dq) {
			if (c == '"') {
				if (k->x.n == dq_start && !k->dq_at_empty)
					put(&k->x, 0, QMARK);
				k->dq = false;
				k->i++;
			} else if (c == '\\' && k->i + 1 < k->len && strchr("$`\"\\\n", w[k->i + 1])) {
				if (w[k->i + 1] != '\n')
					put(&k->x, w[k->i + 1], QUOTED);
				k->i += 2;
			} else {
				put(&k->x, c, QUOTED);
				k->i++;
			}
		} else if (c == '\'') {
			const char *end = memchr(w + k->i + 1, '\'', k->len - k->i - 1);
			size_t stop = end ? (size_t)(end - w) : k->len;
			put(&k->x, 0, QMARK);
			for (size_t i = k->i + 1; i < stop; i++)
				put(&k->x, w[i], QUOTED);
			k->i = stop + 1;
		} else if (c == '"') {
			k->dq = true;
			k->dq_at_empty = false;
			dq_start = k->x.n;
			k->i++;
		} else if (c == '\\' && k->i + 1 < k->len) {
			if (w[k->i + 1] != '\n')
				put(&k->x, w[k->i + 1], QUOTED);
			k->i += 2;
		} else if (c == '~' && at_start && tilde(k)) {
			continue;
		} else {
			put(&k->x, c, PLAIN);
			k->i++;
		}
	}
	return 0;
}

struct field {
	struct xword x;
	bool has; /* a character or a quote mark: the field exists */
};

/* bash (globskipdots) never gives . and .. for a pattern; glob(3) does for .* */
static bool dot_or_dotdot(const char *path)
{
	const char *b = strrchr(path, '/');
	b = b ? b + 1 : path;
	return strcmp(b, ".") == 0 || strcmp(b, "..") == 0;
}

/* A field: as it is, or the paths its pattern matches. */
static void emit(struct field *f, bool fields, struct ksh_strv *out)
{
	struct xword *x = &f->x;
	bool active = false;
	size_t n = 0;
	for (size_t i = 0; i < x->n; i++)
		if (x->tag[i] != QMARK && x->tag[i] != BREAK) {
			n++;
			active |= x->tag[i] != QUOTED && strchr("*?[", x->c[i]);
		}
	char *plain = ksh_xmalloc(n + 1), *p = plain;
	for (size_t i = 0; i < x->n; i++)
		if (x->tag[i] != QMARK && x->tag[i] != BREAK)
			*p++ = x->c[i];
	*p = 0;
	glob_t g;
	if (fields && active) {
		char *pat = ksh_xmalloc(2 * n + 1), *q = pat;
		for (size_t i = 0; i < x->n; i++) {
			if (x->tag[i] == QMARK || x->tag[i] == BREAK)
				continue;
			if (x->c[i] == '\\' || (x->tag[i] == QUOTED && strchr("*?[]", x->c[i])))
				*q++ = '\\';
			*q++ = x->c[i];
		}
		*q = 0;
		int r = glob(pat, 0, NULL, &g);
		free(pat);
		size_t kept = 0;
		for (size_t i = 0; r == 0 && i < g.gl_pathc; i++)
			if (!dot_or_dotdot(g.gl_pathv[i])) {
				ksh_strv_push(out, ksh_xstrdup(g.gl_pathv[i]));
				kept++;
			}
		if (r != GLOB_NOMATCH)
			globfree(&g);
		if (kept) {
			free(plain);
			f->x.n = 0;
			f->has = false;
			return;
		}
	}
	ksh_strv_push(out, plain);
	f->x.n = 0;
	f->has = false;
}

static bool is_ifs_space(char c) { return c == ' ' || c == '\t' || c == '\n'; }

static void split(struct shell *sh, const struct xword *x, struct ksh_strv *out)
{
	const char *ifs = ksh_var_get(sh, "IFS");
	if (!ifs)
		ifs = " \t\n";
	struct field f = {0};
	bool merged = false; /* white space just ended a field: a following
				non-white delimiter belongs to the same one */
	for (size_t i = 0; i < x->n; i++) {
		char c = x->c[i];
		enum tag t = x->tag[i];
		if (t == BREAK) {
			if (f.has)
				emit(&f, true, out);
			merged = false;
		} else if (t == EXPANDED && c && strchr(ifs, c)) {
			if (is_ifs_space(c)) {
				if (f.has) {
					emit(&f, true, out);
					merged = true;
				}
			} else if (merged && !f.has) {
				merged = false;
			} else {
				emit(&f, true, out);
				merged = false;
			}
		} else {
			put(&f.x, c, t);
			f.has = true;
			merged = false;
		}
	}
	if (f.has)
		emit(&f, true, out);
	free(f.x.c);
	free(f.x.tag);
}

int ksh_expand(struct shell *sh, const char *word, bool fields, struct ksh_strv *out)
{
	struct walk k = {.sh = sh, .w = word, .len = strlen(word), .fields = fields};
	int r = walk(&k);
	if (r == 0 && fields) {
		split(sh, &k.x, out);
	} else if (r == 0) {
		struct field f = {.x = k.x, .has = true};
		emit(&f, false, out);
		k.x = f.x;
	}
	free(k.x.c);
	free(k.x.tag);
	return r;
}
