/*
 * karui-sh's parser: recursive descent over the lexer's tokens, one
 * complete command at a time, into the tree of lang.h.
 *
 * The grammar is the part of POSIX's (XCU 2.10.2) that karui-sh runs:
 *
 *   command   := list? (NEWLINE | EOF)
 *   list      := and_or (';' and_or)* ';'?
 *   and_or    := pipeline (('&&' | '||') linebreak pipeline)*
 *   pipeline  := '!'? simple ('|' linebreak simple)*
 *   simple    := (ASSIGNMENT | redir)* (WORD (WORD | redir)*)?   -- not empty
 *   redir     := IO_NUMBER? ('<' | '>' | '>>' | '>|' | '<>' | '<&' | '>&') WORD
 *   linebreak := NEWLINE*
 *
 * A word before the command name that reads NAME=... is an assignment;
 * after it, a plain word.  A linebreak that meets the end of the input
 * asks for more (KSH_MORE); at the true end of the input it is bash's
 * "syntax error: unexpected end of file".  A token that cannot stand
 * where it is gives bash's "syntax error near unexpected token `T'".
 *
 * What the grammar has and karui-sh does not run is refused by name:
 * `&` (background jobs), `(` (subshells), NAME() (functions), here-
 * documents, and the reserved words that open compound commands (if,
 * while, until, for, case, {, [[, function, select, time).  Those that
 * close them (then, fi, done, ...) are syntax errors, as in bash.
 */
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "lang.h"

#define PUSH(a, arr, n, cap) ((arr) = ksh_push((a), (arr), &(n), &(cap), sizeof *(arr)), &(arr)[(n) - 1])

struct parser {
	struct ksh_lexer lx;
	struct ksh_token tok; /* the lookahead */
	struct ksh_arena *a;
	struct ksh_syntax *err;
	bool ends_in_newline; /* the input's last character is a newline */
};

static enum ksh_status next(struct parser *p) { return ksh_lex(&p->lx, &p->tok); }

static bool is_word(const struct parser *p)
{
	return p->tok.kind == TK_WORD || p->tok.kind == TK_IONUM;
}

static bool word_is(const struct parser *p, const char *w)
{
	return is_word(p) && p->tok.len == strlen(w) && memcmp(p->tok.text, w, p->tok.len) == 0;
}

static enum ksh_status fail(struct parser *p, bool show_line, const char *fmt, const char *arg,
			    size_t arglen)
{
	p->err->line = p->tok.line;
	p->err->show_line = show_line;
	snprintf(p->err->msg, sizeof p->err->msg, fmt, (int)arglen, arg);
	return KSH_SYNTAX;
}

/* The end of the input where more was needed. */
static enum ksh_status end_of_input(struct parser *p)
{
	if (!p->lx.final)
		return KSH_MORE;
	p->err->line = p->tok.line + !p->ends_in_newline;
	p->err->show_line = false;
	snprintf(p->err->msg, sizeof p->err->msg, "syntax error: unexpected end of file");
	return KSH_SYNTAX;
}

static enum ksh_status unexpected(struct parser *p)
{
	if (p->tok.kind == TK_NEWLINE || p->tok.kind == TK_EOF)
		return fail(p, true, "syntax error near unexpected token `%.*s'", "newline", 7);
	return fail(p, true, "syntax error near unexpected token `%.*s'", p->tok.text, p->tok.len);
}

static enum ksh_status linebreak(struct parser *p)
{
	enum ksh_status st;
	while (p->tok.kind == TK_NEWLINE)
		if ((st = next(p)) != KSH_OK)
			return st;
	return p->tok.kind == TK_EOF ? end_of_input(p) : KSH_OK;
}

static const char *const opening[] = {"if", "while", "until", "for", "case", "{", "[[",
				      "function", "select", "time", NULL};
static const char *const closing[] = {"then", "else", "elif", "fi", "do", "done", "esac",
				      "}", "]]", "!", NULL};

static bool among(const struct parser *p, const char *const *words)
{
	for (; *words; words++)
		if (word_is(p, *words))
			return true;
	return false;
}

static enum ksh_status redirection(struct parser *p, struct ksh_cmd *c)
{
	int fd = -1;
	enum ksh_status st;
	if (p->tok.kind == TK_IONUM) {
		long v = 0;
		for (size_t i = 0; i < p->tok.len; i++)
			v = v > INT_MAX / 10 ? INT_MAX : v * 10 + (p->tok.text[i] - '0');
		fd = v > INT_MAX ? INT_MAX : (int)v;
		if ((st = next(p)) != KSH_OK)
			return st;
	}
	enum ksh_redir_op op;
	int dflt = 1;
	switch (p->tok.kind) {
	case TK_LESS: op = KSH_R_IN, dflt = 0; break;
	case TK_GREAT: op = KSH_R_OUT; break;
	case TK_DGREAT: op = KSH_R_APPEND; break;
	case TK_CLOBBER: op = KSH_R_CLOBBER; break;
	case TK_LESSGREAT: op = KSH_R_RDWR, dflt = 0; break;
	case TK_LESSAND: op = KSH_R_DUPIN, dflt = 0; break;
	case TK_GREATAND: op = KSH_R_DUPOUT; break;
	case TK_DLESS:
	case TK_DLESSDASH:
		return fail(p, true, "here-documents (`%.*s') are not supported", p->tok.text,
			    p->tok.len);
	default:
		return unexpected(p);
	}
	if ((st = next(p)) != KSH_OK)
		return st;
	if (!is_word(p))
		return unexpected(p);
	struct ksh_redir *r = PUSH(p->a, c->redir, c->nredir, c->capredir);
	r->fd = fd >= 0 ? fd : dflt;
	r->op = op;
	r->word = ksh_strndup(p->a, p->tok.text, p->tok.len);
	return next(p);
}

static bool starts_redirection(enum ksh_tok k)
{
	return k == TK_IONUM || (k >= TK_LESS && k <= TK_DLESSDASH);
}

static enum ksh_status simple(struct parser *p, struct ksh_cmd *c)
{
	enum ksh_status st;
	c->line = p->tok.line;
	if (is_word(p) && among(p, opening))
		return fail(p, true, "compound commands (`%.*s') are not supported", p->tok.text,
			    p->tok.len);
	if (is_word(p) && among(p, closing))
		return unexpected(p);
	if (p->tok.kind == TK_LPAREN)
		return fail(p, true, "subshells (`%.*s') are not supported", "(", 1);
	for (;;) {
		if (starts_redirection(p->tok.kind)) {
			if ((st = redirection(p, c)) != KSH_OK)
				return st;
		} else if (is_word(p)) {
			char *w = ksh_strndup(p->a, p->tok.text, p->tok.len);
			if (c->nword == 0 && ksh_assignment_name(w))
				*PUSH(p->a, c->assign, c->nassign, c->capassign) = w;
			else
				*PUSH(p->a, c->word, c->nword, c->capword) = w;
			if ((st = next(p)) != KSH_OK)
				return st;
			if (p->tok.kind == TK_LPAREN && c->nword == 1 && c->nassign == 0 &&
			    c->nredir == 0)
				return fail(p, true, "functions (`%.*s()') are not supported", w,
					    strlen(w));
		} else {
			break;
		}
	}
	if (c->nword + c->nassign + c->nredir == 0)
		return p->tok.kind == TK_EOF ? end_of_input(p) : unexpected(p);
	return KSH_OK;
}

static enum ksh_status pipeline(struct parser *p, struct ksh_pipeline *pl)
{
	enum ksh_status st;
	if (word_is(p, "!")) {
		pl->bang = true;
		if ((st = next(p)) != KSH_OK)
			return st;
	}
	for (;;) {
		struct ksh_cmd *c = PUSH(p->a, pl->cmd, pl->ncmd, pl->capcmd);
		if ((st = simple(p, c)) != KSH_OK)
			return st;
		if (p->tok.kind != TK_PIPE)
			return KSH_OK;
		if ((st = next(p)) != KSH_OK || (st = linebreak(p)) != KSH_OK)
			return st;
	}
}

static enum ksh_status and_or(struct parser *p, struct ksh_andor *ao)
{
	enum ksh_status st;
	enum ksh_andor_op op = KSH_AO_FIRST;
	for (;;) {
		struct ksh_andor_item *it = PUSH(p->a, ao->item, ao->n, ao->cap);
		it->op = op;
		if ((st = pipeline(p, &it->pl)) != KSH_OK)
			return st;
		if (p->tok.kind != TK_AND_IF && p->tok.kind != TK_OR_IF)
			return KSH_OK;
		op = p->tok.kind == TK_AND_IF ? KSH_AO_AND : KSH_AO_OR;
		if ((st = next(p)) != KSH_OK || (st = linebreak(p)) != KSH_OK)
			return st;
	}
}

static enum ksh_status list(struct parser *p, struct ksh_list *l)
{
	enum ksh_status st;
	for (;;) {
		if ((st = and_or(p, PUSH(p->a, l->ao, l->nao, l->capao))) != KSH_OK)
			return st;
		if (p->tok.kind == TK_AMP)
			return fail(p, true, "background jobs (`%.*s') are not supported", "&", 1);
		if (p->tok.kind != TK_SEMI)
			return KSH_OK;
		if ((st = next(p)) != KSH_OK)
			return st;
		if (p->tok.kind == TK_NEWLINE || p->tok.kind == TK_EOF)
			return KSH_OK;
	}
}

enum ksh_status ksh_parse(const char *s, size_t len, int first_line, bool final,
			  struct ksh_arena *a, struct ksh_list **out, struct ksh_syntax *err)
{
	struct parser p = {.a = a, .err = err, .ends_in_newline = len && s[len - 1] == '\n'};
	ksh_lex_init(&p.lx, s, len, first_line, final, err);
	struct ksh_list *l = ksh_alloc(a, sizeof *l);
	enum ksh_status st = next(&p);
	if (st == KSH_OK && p.tok.kind != TK_NEWLINE && p.tok.kind != TK_EOF)
		st = list(&p, l);
	if (st == KSH_OK && p.tok.kind != TK_NEWLINE && p.tok.kind != TK_EOF)
		st = unexpected(&p);
	if (st == KSH_OK && p.tok.kind == TK_NEWLINE && (st = next(&p)) == KSH_OK &&
	    p.tok.kind != TK_EOF)
		st = unexpected(&p); /* the caller gives whole lines: nothing follows */
	*out = st == KSH_OK ? l : NULL;
	return st;
}

bool ksh_valid_name(const char *s, size_t len)
{
	if (len == 0 || !(s[0] == '_' || (s[0] >= 'A' && s[0] <= 'Z') ||
			  (s[0] >= 'a' && s[0] <= 'z')))
		return false;
	for (size_t i = 1; i < len; i++)
		if (!(s[i] == '_' || (s[i] >= 'A' && s[i] <= 'Z') || (s[i] >= 'a' && s[i] <= 'z') ||
		      (s[i] >= '0' && s[i] <= '9')))
			return false;
	return true;
}

size_t ksh_assignment_name(const char *word)
{
	const char *eq = strchr(word, '=');
	return eq && ksh_valid_name(word, (size_t)(eq - word)) ? (size_t)(eq - word) : 0;
}
