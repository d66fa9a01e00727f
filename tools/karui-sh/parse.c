/*
 * karui-sh's parser: recursive descent over the lexer's tokens, one
 * complete command at a time, into the tree of lang.h.
 *
 * The grammar is POSIX's (XCU 2.10.2):
 *
 *   command   := list? (NEWLINE | EOF)
 *   list      := and_or ((';' | '&') and_or)* (';' | '&')?
 *   and_or    := pipeline (('&&' | '||') linebreak pipeline)*
 *   pipeline  := '!'? cmd ('|' linebreak cmd)*
 *   cmd       := simple | compound redir* | NAME '(' ')' linebreak compound redir*
 *   compound  := '{' clist '}' | '(' clist ')' | if | while | until | for | case
 *   if        := 'if' clist 'then' clist ('elif' clist 'then' clist)* ('else' clist)? 'fi'
 *   while     := ('while' | 'until') clist 'do' clist 'done'
 *   for       := 'for' NAME linebreak ('in' WORD* (';' | NEWLINE))? linebreak 'do' clist 'done'
 *   case      := 'case' WORD linebreak 'in' linebreak
 *                ('('? WORD ('|' WORD)* ')' clist? (';;' linebreak | before 'esac'))* 'esac'
 *   clist     := linebreak and_or (separator and_or)* separator?
 *                -- separator: ';', '&' or newlines, each followed by newlines
 *   simple    := (ASSIGNMENT | redir)* (WORD (WORD | redir)*)?   -- not empty
 *   redir     := IO_NUMBER? ('<' | '>' | '>>' | '>|' | '<>' | '<&' | '>&' | '<<' | '<<-') WORD
 *   linebreak := NEWLINE*
 *
 * Reserved words (if then else elif fi while until for do done case esac
 * in { } !) are words the parser recognizes where a command starts (in,
 * do after for's name and list, esac where a case pattern starts); as
 * arguments they are plain words.  A word before the command name that
 * reads NAME=... is an assignment; after it, a plain word.
 *
 * A here-document's text follows the line its operator is on: each
 * newline token reads the bodies of the here-documents that wait for
 * one, up to their delimiters, before the next token.
 *
 * A linebreak or an open compound command that meets the end of the
 * input asks for more (KSH_MORE); at the true end of the input it is
 * bash's "syntax error: unexpected end of file".  A token that cannot
 * stand where it is gives bash's "syntax error near unexpected token
 * `T'".  Nesting deeper than KSH_MAX_DEPTH is refused, so that no input
 * can exhaust the parser's stack.
 *
 * What bash has and POSIX sh has not is refused by name: [[, function,
 * select, time.
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
	bool subst;           /* inside $(...): the end of the input is the lexer's to report */
	struct ksh_heredoc **pending; /* here-documents waiting for their text */
	size_t npending, cappending;
};

static enum ksh_status end_of_input(struct parser *p);

/* Read the text of each waiting here-document, after a newline. */
static enum ksh_status read_heredocs(struct parser *p)
{
	struct ksh_lexer *lx = &p->lx;
	for (size_t i = 0; i < p->npending; i++) {
		struct ksh_heredoc *d = p->pending[i];
		size_t dlen = strlen(d->delim), start = lx->pos, n = 0;
		int line = lx->line;
		char *body = ksh_alloc(p->a, lx->len - lx->pos + 1);
		for (;;) {
			if (lx->pos == lx->len) {
				if (!lx->final) {
					lx->line = line;
					lx->pos = start;
					return KSH_MORE;
				}
				break; /* dash's: the text ends with the input */
			}
			const char *l = lx->s + lx->pos;
			const char *nl = memchr(l, '\n', lx->len - lx->pos);
			size_t ll = nl ? (size_t)(nl - l) : lx->len - lx->pos;
			lx->pos += ll + (nl != NULL);
			lx->line++;
			size_t skip = 0;
			if (d->strip_tabs)
				while (skip < ll && l[skip] == '\t')
					skip++;
			if (ll - skip == dlen && memcmp(l + skip, d->delim, dlen) == 0)
				break;
			memcpy(body + n, l + skip, ll - skip + (nl != NULL));
			n += ll - skip + (nl != NULL);
		}
		body[n] = 0;
		d->body = body;
	}
	p->npending = 0;
	return KSH_OK;
}

static enum ksh_status next(struct parser *p)
{
	enum ksh_status st = ksh_lex(&p->lx, &p->tok);
	if (st == KSH_OK && p->tok.kind == TK_NEWLINE && p->npending)
		st = read_heredocs(p);
	return st;
}

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
	if (!p->lx.final || p->subst)
		return KSH_MORE;
	p->err->line = p->tok.line + !p->ends_in_newline;
	p->err->show_line = false;
	snprintf(p->err->msg, sizeof p->err->msg, "syntax error: unexpected end of file");
	return KSH_SYNTAX;
}

static enum ksh_status unexpected(struct parser *p)
{
	if (p->tok.kind == TK_EOF)
		return end_of_input(p);
	if (p->tok.kind == TK_NEWLINE)
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

/* The reserved word w, then the next token; else an error. */
static enum ksh_status expect(struct parser *p, const char *w)
{
	return word_is(p, w) ? next(p) : unexpected(p);
}

static const char *const bashisms[] = {"[[", "function", "select", "time", NULL};
/* the words that end a compound list */
static const char *const closing[] = {"then", "else", "elif", "fi", "do", "done", "esac",
				      "}", NULL};

static bool among(const struct parser *p, const char *const *words)
{
	for (; *words; words++)
		if (word_is(p, *words))
			return true;
	return false;
}

/* The delimiter of a here-document: its word with quotes removed. */
static void heredoc_delim(struct parser *p, struct ksh_heredoc *d, const char *w, size_t len)
{
	char *out = ksh_alloc(p->a, len + 1);
	size_t n = 0;
	char q = 0;
	for (size_t i = 0; i < len; i++) {
		char c = w[i];
		if (q == '\'' ? c == '\'' : q == '"' ? c == '"' : c == '\'' || c == '"') {
			q = q ? 0 : c;
			d->quoted = true;
		} else if (c == '\\' && q != '\'' && i + 1 < len &&
			   (!q || strchr("$`\"\\", w[i + 1]))) {
			out[n++] = w[++i];
			d->quoted = true;
		} else {
			out[n++] = c;
		}
	}
	out[n] = 0;
	d->delim = out;
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
	bool strip = false;
	switch (p->tok.kind) {
	case TK_LESS: op = KSH_R_IN, dflt = 0; break;
	case TK_GREAT: op = KSH_R_OUT; break;
	case TK_DGREAT: op = KSH_R_APPEND; break;
	case TK_CLOBBER: op = KSH_R_CLOBBER; break;
	case TK_LESSGREAT: op = KSH_R_RDWR, dflt = 0; break;
	case TK_LESSAND: op = KSH_R_DUPIN, dflt = 0; break;
	case TK_GREATAND: op = KSH_R_DUPOUT; break;
	case TK_DLESSDASH: strip = true; /* fall through */
	case TK_DLESS: op = KSH_R_HEREDOC, dflt = 0; break;
	default:
		return unexpected(p);
	}
	if ((st = next(p)) != KSH_OK)
		return st;
	if (!is_word(p))
		return p->tok.kind == TK_EOF ? fail(p, true, "syntax error near unexpected token `%.*s'",
						    "newline", 7) : unexpected(p);
	struct ksh_redir *r = PUSH(p->a, c->redir, c->nredir, c->capredir);
	r->fd = fd >= 0 ? fd : dflt;
	r->op = op;
	r->word = ksh_strndup(p->a, p->tok.text, p->tok.len);
	if (op == KSH_R_HEREDOC) {
		struct ksh_heredoc *d = ksh_alloc(p->a, sizeof *d);
		d->strip_tabs = strip;
		d->body = "";
		heredoc_delim(p, d, p->tok.text, p->tok.len);
		r->doc = d;
		*PUSH(p->a, p->pending, p->npending, p->cappending) = d;
	}
	return next(p);
}

static bool starts_redirection(enum ksh_tok k)
{
	return k == TK_IONUM || (k >= TK_LESS && k <= TK_DLESSDASH);
}

/* Where a compound list ends: a closing reserved word, `)`, `;;`. */
static bool at_list_end(const struct parser *p)
{
	return p->tok.kind == TK_RPAREN || p->tok.kind == TK_DSEMI || p->tok.kind == TK_EOF ||
	       among(p, closing);
}

static enum ksh_status and_or(struct parser *p, struct ksh_andor *ao);

/* A compound list, up to what ends it (left as the lookahead).  empty:
 * it may have no command (a case item's, $()'s). */
static enum ksh_status clist(struct parser *p, struct ksh_list **out, bool empty)
{
	enum ksh_status st;
	struct ksh_list *l = ksh_alloc(p->a, sizeof *l);
	*out = l;
	if ((st = linebreak(p)) != KSH_OK)
		return st;
	if (at_list_end(p))
		return empty ? KSH_OK : unexpected(p);
	for (;;) {
		struct ksh_andor *ao = PUSH(p->a, l->ao, l->nao, l->capao);
		if ((st = and_or(p, ao)) != KSH_OK)
			return st;
		if (p->tok.kind == TK_SEMI || p->tok.kind == TK_AMP) {
			ao->background = p->tok.kind == TK_AMP;
			if ((st = next(p)) != KSH_OK)
				return st;
		} else if (p->tok.kind != TK_NEWLINE) {
			return KSH_OK;
		}
		if ((st = linebreak(p)) != KSH_OK)
			return st;
		if (at_list_end(p))
			return KSH_OK;
	}
}

static enum ksh_status command(struct parser *p, struct ksh_cmd *c);

static enum ksh_status if_clause(struct parser *p, struct ksh_cmd *c)
{
	enum ksh_status st;
	c->kind = KSH_C_IF;
	do {
		struct ksh_if_clause *cl = PUSH(p->a, c->clause, c->nclause, c->capclause);
		if ((st = next(p)) != KSH_OK || (st = clist(p, &cl->cond, false)) != KSH_OK ||
		    (st = expect(p, "then")) != KSH_OK || (st = clist(p, &cl->body, false)) != KSH_OK)
			return st;
	} while (word_is(p, "elif"));
	if (word_is(p, "else") &&
	    ((st = next(p)) != KSH_OK || (st = clist(p, &c->else_part, false)) != KSH_OK))
		return st;
	return expect(p, "fi");
}

/* do clist done */
static enum ksh_status do_group(struct parser *p, struct ksh_cmd *c)
{
	enum ksh_status st;
	if ((st = expect(p, "do")) != KSH_OK || (st = clist(p, &c->body, false)) != KSH_OK)
		return st;
	return expect(p, "done");
}

static enum ksh_status while_clause(struct parser *p, struct ksh_cmd *c)
{
	enum ksh_status st;
	c->kind = word_is(p, "while") ? KSH_C_WHILE : KSH_C_UNTIL;
	if ((st = next(p)) != KSH_OK || (st = clist(p, &c->cond, false)) != KSH_OK)
		return st;
	return do_group(p, c);
}

static enum ksh_status for_clause(struct parser *p, struct ksh_cmd *c)
{
	enum ksh_status st;
	c->kind = KSH_C_FOR;
	if ((st = next(p)) != KSH_OK)
		return st;
	if (!is_word(p) || !ksh_valid_name(p->tok.text, p->tok.len))
		return unexpected(p);
	c->name = ksh_strndup(p->a, p->tok.text, p->tok.len);
	if ((st = next(p)) != KSH_OK || (st = linebreak(p)) != KSH_OK)
		return st;
	if (word_is(p, "in")) {
		c->has_in = true;
		if ((st = next(p)) != KSH_OK)
			return st;
		while (is_word(p)) {
			*PUSH(p->a, c->word, c->nword, c->capword) =
				ksh_strndup(p->a, p->tok.text, p->tok.len);
			if ((st = next(p)) != KSH_OK)
				return st;
		}
		if (p->tok.kind != TK_SEMI && p->tok.kind != TK_NEWLINE)
			return unexpected(p);
		if ((st = next(p)) != KSH_OK)
			return st;
	} else if (p->tok.kind == TK_SEMI) {
		if ((st = next(p)) != KSH_OK)
			return st;
	}
	if ((st = linebreak(p)) != KSH_OK)
		return st;
	return do_group(p, c);
}

static enum ksh_status case_clause(struct parser *p, struct ksh_cmd *c)
{
	enum ksh_status st;
	c->kind = KSH_C_CASE;
	if ((st = next(p)) != KSH_OK)
		return st;
	if (!is_word(p))
		return unexpected(p);
	*PUSH(p->a, c->word, c->nword, c->capword) = ksh_strndup(p->a, p->tok.text, p->tok.len);
	if ((st = next(p)) != KSH_OK || (st = linebreak(p)) != KSH_OK ||
	    (st = expect(p, "in")) != KSH_OK || (st = linebreak(p)) != KSH_OK)
		return st;
	while (!word_is(p, "esac")) {
		struct ksh_case_item *it = PUSH(p->a, c->item, c->nitem, c->capitem);
		if (p->tok.kind == TK_LPAREN && (st = next(p)) != KSH_OK)
			return st;
		for (;;) {
			if (!is_word(p))
				return unexpected(p);
			*PUSH(p->a, it->pat, it->npat, it->cappat) =
				ksh_strndup(p->a, p->tok.text, p->tok.len);
			if ((st = next(p)) != KSH_OK)
				return st;
			if (p->tok.kind != TK_PIPE)
				break;
			if ((st = next(p)) != KSH_OK)
				return st;
		}
		if (p->tok.kind != TK_RPAREN)
			return unexpected(p);
		if ((st = next(p)) != KSH_OK || (st = clist(p, &it->body, true)) != KSH_OK)
			return st;
		if (p->tok.kind == TK_DSEMI) {
			if ((st = next(p)) != KSH_OK || (st = linebreak(p)) != KSH_OK)
				return st;
		} else if (!word_is(p, "esac")) {
			return unexpected(p);
		}
	}
	return next(p);
}

static enum ksh_status simple(struct parser *p, struct ksh_cmd *c)
{
	enum ksh_status st;
	c->kind = KSH_C_SIMPLE;
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
			    c->nredir == 0) {
				if (!ksh_valid_name(w, strlen(w)))
					return unexpected(p);
				if ((st = next(p)) != KSH_OK)
					return st;
				if (p->tok.kind != TK_RPAREN)
					return unexpected(p);
				if ((st = next(p)) != KSH_OK || (st = linebreak(p)) != KSH_OK)
					return st;
				if (!(p->tok.kind == TK_LPAREN || word_is(p, "{") || word_is(p, "if") ||
				      word_is(p, "while") || word_is(p, "until") || word_is(p, "for") ||
				      word_is(p, "case")))
					return unexpected(p);
				c->kind = KSH_C_FUNCDEF;
				c->name = w;
				c->nword = 0;
				c->func = ksh_alloc(p->a, sizeof *c->func);
				return command(p, c->func);
			}
		} else {
			break;
		}
	}
	if (c->nword + c->nassign + c->nredir == 0)
		return unexpected(p);
	return KSH_OK;
}

static enum ksh_status command(struct parser *p, struct ksh_cmd *c)
{
	enum ksh_status st;
	c->line = p->tok.line;
	if (is_word(p) && among(p, bashisms))
		return fail(p, true, "`%.*s' is not supported (not POSIX sh)", p->tok.text,
			    p->tok.len);
	if (is_word(p) && (among(p, closing) || word_is(p, "!")))
		return unexpected(p);
	bool compound = true;
	if (++p->lx.depth > KSH_MAX_DEPTH)
		return fail(p, true, "syntax error: commands nested too deeply%.*s", "", 0);
	if (p->tok.kind == TK_LPAREN) {
		c->kind = KSH_C_SUBSHELL;
		if ((st = next(p)) != KSH_OK || (st = clist(p, &c->body, false)) != KSH_OK)
			return st;
		st = p->tok.kind == TK_RPAREN ? next(p) : unexpected(p);
	} else if (word_is(p, "{")) {
		c->kind = KSH_C_GROUP;
		if ((st = next(p)) != KSH_OK || (st = clist(p, &c->body, false)) != KSH_OK)
			return st;
		st = expect(p, "}");
	} else if (word_is(p, "if")) {
		st = if_clause(p, c);
	} else if (word_is(p, "while") || word_is(p, "until")) {
		st = while_clause(p, c);
	} else if (word_is(p, "for")) {
		st = for_clause(p, c);
	} else if (word_is(p, "case")) {
		st = case_clause(p, c);
	} else {
		compound = false;
		st = simple(p, c);
	}
	p->lx.depth--;
	while (st == KSH_OK && compound && starts_redirection(p->tok.kind))
		st = redirection(p, c);
	return st;
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
		if ((st = command(p, c)) != KSH_OK)
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
		struct ksh_andor *ao = PUSH(p->a, l->ao, l->nao, l->capao);
		if ((st = and_or(p, ao)) != KSH_OK)
			return st;
		if (p->tok.kind != TK_SEMI && p->tok.kind != TK_AMP)
			return KSH_OK;
		ao->background = p->tok.kind == TK_AMP;
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
	if (st == KSH_OK && p.npending && !final)
		st = KSH_MORE; /* a here-document on the last line, no newline yet */
	*out = st == KSH_OK ? l : NULL;
	return st;
}

enum ksh_status ksh_parse_subst(struct ksh_lexer *lx, int depth)
{
	struct ksh_arena a = {0};
	struct parser p = {.a = &a, .err = lx->err, .subst = true};
	p.lx = *lx;
	p.lx.depth = depth;
	struct ksh_list *l;
	enum ksh_status st = next(&p);
	if (st == KSH_OK)
		st = clist(&p, &l, true);
	if (st == KSH_OK && p.tok.kind != TK_RPAREN)
		st = unexpected(&p);
	if (st == KSH_OK) {
		lx->pos = p.lx.pos;
		lx->line = p.lx.line;
	}
	ksh_arena_free(&a);
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
