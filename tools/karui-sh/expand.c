/*
 * karui-sh's word expansion (XCU 2.6): tilde expansion, parameter
 * expansion, command substitution, arithmetic expansion, field splitting,
 * pathname expansion and quote removal, in that order, over a word as
 * the lexer kept it.
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
 * with a backslash, relative to the shell's directory; no match leaves
 * the field as it is, and . and .. are never matched (bash's defaults).
 *
 * Parameters: $NAME and ${NAME}, $? $$ $# $! $- $0..$9 ${N} $@ $*, and
 * ${NAME:-word} ${NAME-word} ${NAME:=word} ${NAME=word} ${NAME:?word}
 * ${NAME?word} ${NAME:+word} ${NAME+word} ${#NAME} ${NAME%pat}
 * ${NAME%%pat} ${NAME#pat} ${NAME##pat}.  The word of each is expanded
 * by a walk of its own (quotes in it quote; inside "..." everything it
 * gives is quoted), and only when the form needs it.  Any other ${...}
 * is bash's "bad substitution", which ends the command (status 1).
 *
 * $(...) and `...` run their text in a subshell (ksh_capture) and give
 * its output, trailing newlines removed; $((...)) expands its text as
 * in double quotes and evaluates it (arith.c).  The lexer found where
 * each ends, and finds it again here (ksh_lex_skip_expansion).
 */
#include <errno.h>
#include <fnmatch.h>
#include <glob.h>
#include <pwd.h>
#include <stdarg.h>
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

static void xword_free(struct xword *x)
{
	free(x->c);
	free(x->tag);
	*x = (struct xword){0};
}

void ksh_xerror(struct shell *sh, int status, const char *fmt, ...)
{
	char *msg;
	va_list ap;
	va_start(ap, fmt);
	int n = vasprintf(&msg, fmt, ap);
	va_end(ap);
	if (n >= 0) {
		ksh_say(sh, KSH_ERR(sh), "%s", msg);
		free(msg);
	}
	sh->xerr = status;
}

struct walk {
	struct shell *sh;
	const char *w;
	size_t i, len;
	bool dq;          /* inside "..." */
	bool dq_at_empty; /* this "..." held "$@" with no parameters */
	bool fields;      /* an ordinary word, not an assignment's value */
	bool all_quoted;  /* the word of a ${...} inside "...": all it gives is quoted */
	bool heredoc;     /* a here-document's text: " and ' are characters */
	struct xword x;
};

static int walk(struct walk *k);

static const char *positional(const struct shell *sh, long n)
{
	if (n == 0)
		return sh->arg0;
	return n <= sh->nargs ? sh->args[n - 1] : NULL;
}

static enum tag vtag(const struct walk *k)
{
	return k->dq || k->all_quoted ? QUOTED : EXPANDED;
}

/* $@ and $*: unquoted, each parameter is a field of its own, split
 * further; "$@" keeps each whole; "$*" joins them with $IFS's first
 * character. */
static void all_params(struct walk *k, bool at)
{
	struct shell *sh = k->sh;
	bool dq = k->dq || k->all_quoted;
	if (!dq || at) {
		if (dq && sh->nargs == 0)
			k->dq_at_empty = true;
		for (int a = 0; a < sh->nargs; a++) {
			if (a)
				put(&k->x, 0, BREAK);
			if (dq)
				put(&k->x, 0, QMARK);
			put_str(&k->x, sh->args[a], dq ? QUOTED : EXPANDED);
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

/* The value of a parameter other than $@ and $* (len chars at name):
 * *v NULL when unset; buf holds a number's text.  false: no such name. */
static bool param_value(struct shell *sh, const char *name, size_t len, const char **v,
			char *buf, size_t size)
{
	*v = NULL;
	if (len == 1 && strchr("?$#!-", name[0])) {
		switch (name[0]) {
		case '?': snprintf(buf, size, "%d", sh->status); break;
		case '$': snprintf(buf, size, "%ld", (long)getpid()); break;
		case '#': snprintf(buf, size, "%d", sh->nargs); break;
		case '!':
			if (!sh->last_job)
				return true;
			snprintf(buf, size, "%ld", sh->last_job);
			break;
		default:
			snprintf(buf, size, "%s%s%s", sh->opt_u ? "u" : "", sh->opt_x ? "x" : "",
				 sh->opt_e ? "e" : ""); /* dash's order */
		}
		*v = buf;
		return true;
	}
	if (len > 0 && strspn(name, "0123456789") >= len) {
		long n = 0;
		for (size_t i = 0; i < len && n < 1000000; i++)
			n = n * 10 + (name[i] - '0');
		*v = positional(sh, n);
		return true;
	}
	if (!ksh_valid_name(name, len))
		return false;
	char *nm = ksh_strndup_x(name, len);
	*v = ksh_var_get(sh, nm);
	free(nm);
	return true;
}

/* set -u: expanding an unset parameter is an error (not $@ or $*). */
static int unset_error(struct walk *k, const char *name, size_t len)
{
	ksh_xerror(k->sh, 2, "%.*s: unbound variable", (int)len, name);
	return -1;
}

/* One parameter by name, as $NAME or ${NAME} give it.  1: no such name. */
static int param(struct walk *k, const char *name, size_t len)
{
	if (len == 1 && (name[0] == '@' || name[0] == '*')) {
		all_params(k, name[0] == '@');
		return 0;
	}
	char buf[64];
	const char *v;
	if (!param_value(k->sh, name, len, &v, buf, sizeof buf))
		return 1;
	if (!v && k->sh->opt_u && !(len == 1 && name[0] == '!'))
		return unset_error(k, name, len);
	put_str(&k->x, v, vtag(k));
	return 0;
}

/* The text [from, to) of the word, walked on its own as the word of a
 * ${...}: inside "...", all it gives is quoted, but for a pattern (POSIX:
 * the enclosing double quotes do not quote it). */
static int subwalk(struct walk *k, size_t from, size_t to, bool pat, struct xword *out)
{
	struct walk s = {.sh = k->sh, .w = k->w + from, .len = to - from, .fields = k->fields,
			 .all_quoted = !pat && (k->dq || k->all_quoted)};
	int r = walk(&s);
	*out = s.x;
	return r;
}

/* An xword's characters alone: quote removal. */
static char *plain(const struct xword *x)
{
	char *s = ksh_xmalloc(x->n + 1), *p = s;
	for (size_t i = 0; i < x->n; i++)
		if (x->tag[i] != QMARK && x->tag[i] != BREAK)
			*p++ = x->c[i];
	*p = 0;
	return s;
}

/* An xword as an fnmatch pattern: its quoted characters escaped. */
static char *pattern(const struct xword *x)
{
	char *s = ksh_xmalloc(2 * x->n + 1), *p = s;
	for (size_t i = 0; i < x->n; i++) {
		if (x->tag[i] == QMARK || x->tag[i] == BREAK)
			continue;
		if (x->tag[i] == QUOTED && strchr("*?[]\\", x->c[i]))
			*p++ = '\\';
		*p++ = x->c[i];
	}
	*p = 0;
	return s;
}

/* Append a ${...} word's expansion: unquoted text in it is like an
 * expansion's result (split, globbed). */
static void append_word(struct walk *k, const struct xword *x)
{
	for (size_t i = 0; i < x->n; i++)
		put(&k->x, x->c[i], x->tag[i] == PLAIN ? EXPANDED : (enum tag)x->tag[i]);
}

/* ${NAME%pat} and the others: value with the prefix or suffix removed. */
static char *remove_affix(const char *v, const char *pat, bool suffix, bool longest)
{
	size_t len = strlen(v);
	char *t = ksh_xstrdup(v);
	for (size_t step = 0; step <= len; step++) {
		size_t n = longest ? len - step : step; /* the length of what is removed */
		int m;
		if (suffix) {
			m = fnmatch(pat, v + len - n, 0);
		} else {
			char c = t[n];
			t[n] = 0;
			m = fnmatch(pat, t, 0);
			t[n] = c;
		}
		if (m == 0) {
			if (suffix)
				t[len - n] = 0;
			else
				memmove(t, t + n, len - n + 1);
			return t;
		}
	}
	return t;
}

static size_t chars(const char *s)
{
	size_t n = mbstowcs(NULL, s, 0);
	return n == (size_t)-1 ? strlen(s) : n;
}

/* The parameter's value in the word: $@ and $* as all the parameters. */
static void put_value(struct walk *k, const char *name, bool at, const char *v)
{
	if (at)
		all_params(k, name[0] == '@');
	else
		put_str(&k->x, v, vtag(k));
}

/* ${...} from k->i to end (just past its `}`). */
static int brace(struct walk *k, size_t end)
{
	const char *w = k->w;
	size_t j = k->i + 2, close = end - 1;
	struct shell *sh = k->sh;
	bool length = false;
	if (w[j] == '#' && j + 1 < close) {
		length = true;
		j++;
	}
	size_t n = 0;
	if (j < close && (ksh_valid_name(w + j, 1))) {
		while (j + n < close && ksh_valid_name(w + j, n + 1))
			n++;
	} else if (j < close && w[j] >= '0' && w[j] <= '9') {
		while (j + n < close && w[j + n] >= '0' && w[j + n] <= '9')
			n++;
	} else if (j < close && strchr("?$#!@*-", w[j])) {
		n = 1;
	}
	size_t op = j + n;
	bool colon = op < close && w[op] == ':';
	char o = op + colon < close ? w[op + colon] : 0;
	bool plain_form = op == close;
	bool known = n > 0 && (plain_form || (!length && ((o && strchr("-=?+", o)) ||
							  (!colon && o && strchr("%#", o)))));
	if (!known) {
		ksh_xerror(sh, 1, "%.*s: bad substitution", (int)(end - k->i), w + k->i);
		return -1;
	}
	const char *name = w + j;
	bool at = n == 1 && (name[0] == '@' || name[0] == '*');
	if (plain_form && !length) {
		k->i = end;
		return param(k, name, n) ? -1 : 0;
	}
	char buf[64];
	const char *v = NULL;
	if (at) {
		v = sh->nargs ? "" : NULL; /* only whether it is set matters below */
	} else {
		param_value(sh, name, n, &v, buf, sizeof buf);
	}
	k->i = end;
	if (length) {
		if (!v && sh->opt_u && !at)
			return unset_error(k, name, n);
		snprintf(buf, sizeof buf, "%zu", at ? (size_t)sh->nargs : v ? chars(v) : 0);
		put_str(&k->x, buf, vtag(k));
		return 0;
	}
	size_t wfrom = op + colon + 1 + ((o == '%' || o == '#') && op + 1 < close && w[op + 1] == o);
	bool set = at ? sh->nargs > 0 : v != NULL;
	bool empty = at ? sh->nargs == 0 || (sh->nargs == 1 && !*sh->args[0]) : !v || !*v;
	bool use_word = colon ? empty : !set;
	struct xword x = {0};
	int r = 0;
	switch (o) {
	case '-':
	case '+':
		if (use_word == (o == '-')) {
			if ((r = subwalk(k, wfrom, close, false, &x)) == 0)
				append_word(k, &x);
		} else if (o == '-') {
			put_value(k, name, at, v);
		}
		break;
	case '=':
		if (!use_word) {
			put_value(k, name, at, v);
			break;
		}
		if (!ksh_valid_name(name, n)) {
			ksh_xerror(sh, 2, "$%.*s: cannot assign in this way", (int)n, name);
			return -1;
		}
		if ((r = subwalk(k, wfrom, close, false, &x)) == 0) {
			char *val = plain(&x), *nm = ksh_strndup_x(name, n);
			ksh_var_set(sh, nm, val, false);
			put_str(&k->x, val, vtag(k));
			free(nm);
			free(val);
		}
		break;
	case '?':
		if (!use_word) {
			put_value(k, name, at, v);
			break;
		}
		if ((r = subwalk(k, wfrom, close, false, &x)) == 0) {
			char *msg = plain(&x);
			ksh_xerror(sh, 2, "%.*s: %s", (int)n, name,
				   *msg || wfrom < close ? msg : "parameter null or not set");
			free(msg);
			r = -1;
		}
		break;
	default: { /* % %% # ## */
		if (!v && sh->opt_u && !at) {
			r = unset_error(k, name, n);
			break;
		}
		if ((r = subwalk(k, wfrom, close, true, &x)) == 0) {
			char *pat = pattern(&x);
			char *t = remove_affix(v ? v : "", pat, o == '%', wfrom == op + 2);
			put_str(&k->x, t, vtag(k));
			free(t);
			free(pat);
		}
	}
	}
	xword_free(&x);
	return r;
}

/* A command substitution's output: trailing newlines removed, NUL bytes
 * dropped. */
static int substitute(struct walk *k, const char *text, size_t len)
{
	char *out;
	size_t n;
	int status;
	if (ksh_capture(k->sh, text, len, &out, &n, &status) < 0) {
		k->sh->xerr = 1;
		return -1;
	}
	while (n && out[n - 1] == '\n')
		n--;
	for (size_t i = 0; i < n; i++)
		if (out[i])
			put(&k->x, out[i], vtag(k));
	free(out);
	k->sh->subst_status = status;
	k->sh->status = status;
	return 0;
}

/* `...`: its text with \$ \` \\ (and \" inside "...") unquoted. */
static int backquoted(struct walk *k, size_t end)
{
	const char *w = k->w;
	char *t = ksh_xmalloc(end - k->i), *p = t;
	for (size_t i = k->i + 1; i < end - 1; i++) {
		if (w[i] == '\\' && i + 1 < end - 1 &&
		    (strchr("$`\\", w[i + 1]) || (k->dq && w[i + 1] == '"')))
			i++;
		*p++ = w[i];
	}
	int r = substitute(k, t, (size_t)(p - t));
	free(t);
	k->i = end;
	return r;
}

/* $((...)): its text expanded as in "...", then evaluated. */
static int arithmetic(struct walk *k, size_t end)
{
	struct walk s = {.sh = k->sh, .w = k->w + k->i + 3, .len = end - k->i - 5, .dq = true,
			 .heredoc = true};
	int r = walk(&s);
	if (r == 0) {
		char *expr = plain(&s.x);
		long v;
		r = ksh_arith(k->sh, expr, &v);
		if (r == 0) {
			char buf[32];
			snprintf(buf, sizeof buf, "%ld", v);
			put_str(&k->x, buf, vtag(k));
		} else {
			k->sh->xerr = 2;
		}
		free(expr);
	}
	xword_free(&s.x);
	k->i = end;
	return r;
}

/* At a $ or a backquote: the expansion it starts, or a literal $.
 * -1: an error, told. */
static int dollar(struct walk *k)
{
	const char *w = k->w;
	size_t j = k->i + 1;
	if (w[k->i] == '`' || (j < k->len && (w[j] == '{' || w[j] == '('))) {
		struct ksh_syntax err;
		struct ksh_lexer lx;
		ksh_lex_init(&lx, w, k->len, k->sh->line, true, &err);
		lx.pos = k->i;
		if (ksh_lex_skip_expansion(&lx, k->dq || k->all_quoted) != KSH_OK) {
			ksh_xerror(k->sh, 2, "%s", err.msg);
			return -1;
		}
		if (w[k->i] == '`')
			return backquoted(k, lx.pos);
		if (w[j] == '{')
			return brace(k, lx.pos);
		if (lx.arith)
			return arithmetic(k, lx.pos);
		int r = substitute(k, w + j + 1, lx.pos - j - 2);
		k->i = lx.pos;
		return r;
	}
	size_t n = 0;
	if (j < k->len && ksh_valid_name(w + j, 1)) {
		while (j + n < k->len && ksh_valid_name(w + j, n + 1))
			n++;
	} else if (j < k->len && (strchr("?$#!@*-", w[j]) || (w[j] >= '0' && w[j] <= '9'))) {
		n = 1;
	}
	if (n == 0) {
		put(&k->x, '$', k->dq || k->all_quoted ? QUOTED : PLAIN);
		k->i = j;
		return 0;
	}
	k->i = j + n;
	return param(k, w + j, n) < 0 ? -1 : 0;
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
		if (strchr("'\"\\$`}", w[i]))
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
	enum tag lit = k->all_quoted ? QUOTED : PLAIN;
	while (k->i < k->len) {
		char c = w[k->i];
		bool at_start = !k->heredoc && !k->all_quoted &&
				(k->i == 0 || (!fields && !k->dq && w[k->i - 1] == ':'));
		if (c == '$' || c == '`') {
			if (dollar(k) < 0)
				return -1;
		} else if (k->dq) {
			if (c == '"' && !k->heredoc) {
				if (k->x.n == dq_start && !k->dq_at_empty)
					put(&k->x, 0, QMARK);
				k->dq = false;
				k->i++;
			} else if (c == '\\' && k->i + 1 < k->len &&
				   strchr(k->heredoc ? "$`\\\n" : "$`\"\\\n", w[k->i + 1])) {
				if (w[k->i + 1] != '\n')
					put(&k->x, w[k->i + 1], QUOTED);
				k->i += 2;
			} else {
				put(&k->x, c, QUOTED);
				k->i++;
			}
		} else if (c == '\'' && !k->all_quoted) {
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
			put(&k->x, c, lit);
			k->i++;
		}
	}
	return 0;
}

char *ksh_expand_heredoc(struct shell *sh, const char *text)
{
	struct walk k = {.sh = sh, .w = text, .len = strlen(text), .dq = true, .heredoc = true};
	sh->xerr = 1;
	char *s = walk(&k) == 0 ? plain(&k.x) : NULL;
	xword_free(&k.x);
	return s;
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

/* A field: as it is, or the paths its pattern matches (relative ones
 * from the shell's directory). */
static void emit(struct shell *sh, struct field *f, bool fields, struct ksh_strv *out)
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
		size_t skip = 0, cl = sh->cwd ? strlen(sh->cwd) : 0;
		char *pat = ksh_xmalloc(2 * n + 2 * cl + 2), *q = pat;
		if (x->n && x->c[0] != '/' && cl) {
			for (const char *c = sh->cwd; *c; c++) {
				if (strchr("*?[]\\", *c))
					*q++ = '\\';
				*q++ = *c;
			}
			skip = cl;
			if (sh->cwd[cl - 1] != '/') {
				*q++ = '/';
				skip++;
			}
		}
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
				ksh_strv_push(out, ksh_xstrdup(g.gl_pathv[i] + skip));
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
				emit(sh, &f, true, out);
			merged = false;
		} else if (t == EXPANDED && c && strchr(ifs, c)) {
			if (is_ifs_space(c)) {
				if (f.has) {
					emit(sh, &f, true, out);
					merged = true;
				}
			} else if (merged && !f.has) {
				merged = false;
			} else {
				emit(sh, &f, true, out);
				merged = false;
			}
		} else {
			put(&f.x, c, t);
			f.has = true;
			merged = false;
		}
	}
	if (f.has)
		emit(sh, &f, true, out);
	free(f.x.c);
	free(f.x.tag);
}

int ksh_expand(struct shell *sh, const char *word, enum ksh_xmode mode, struct ksh_strv *out)
{
	struct walk k = {.sh = sh, .w = word, .len = strlen(word), .fields = mode != KSH_X_ASSIGN};
	int r = walk(&k);
	if (r == 0 && mode == KSH_X_FIELDS) {
		split(sh, &k.x, out);
	} else if (r == 0 && mode == KSH_X_PATTERN) {
		ksh_strv_push(out, pattern(&k.x));
	} else if (r == 0) {
		struct field f = {.x = k.x, .has = true};
		emit(sh, &f, false, out);
		k.x = f.x;
	}
	free(k.x.c);
	free(k.x.tag);
	return r;
}
