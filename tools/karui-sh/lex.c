/*
 * karui-sh's lexer: POSIX token recognition (XCU 2.3) over one command's
 * text.
 *
 * Tokens are operators (the longest of | || & && ; ;; ( ) < > << <<- <&
 * >& <> >> >|), newlines, IO numbers (digits that a < or > follows at
 * once) and words.  A word runs to the first unquoted blank, newline or
 * operator character; its text is kept as written, so the quotes it holds
 * still mean something to expansion.  The lexer only has to know where
 * quotes end: '...' at the next ', "..." at the next unescaped " (a
 * backslash escapes the character after it).  A backslash-newline joins lines between tokens and inside words (where
 * expansion drops it); # at the start of a token starts a comment.
 *
 * Expansions are part of the word that holds them, and the lexer finds
 * where each ends: ${...} at its `}`, $((...)) at its `))` (a `)` that
 * closes no `(` before that makes it `$( (...) )`, a command substitution
 * holding a subshell, as bash reads it), `...` at the next unescaped
 * backquote, and $(...) where the parser, called on what follows the `(`,
 * finds the `)` that ends a command list: a `)` of a case pattern inside
 * is no end.  Quotes and expansions nest inside each.
 *
 * Input arrives a line at a time.  When the text ends inside a quote, an
 * expansion, or right after a backslash, the lexer says KSH_MORE unless
 * `final` (no more input will come), when bash's "unexpected EOF while
 * looking for matching" error is due instead.
 */
#include <stdio.h>
#include <string.h>

#include "lang.h"

void ksh_lex_init(struct ksh_lexer *lx, const char *s, size_t len, int first_line, bool final,
		  struct ksh_syntax *err)
{
	*lx = (struct ksh_lexer){.s = s, .len = len, .line = first_line, .final = final, .err = err};
}

static enum ksh_status eof_in(struct ksh_lexer *lx, int line, char what)
{
	if (!lx->final)
		return KSH_MORE;
	lx->err->line = line;
	lx->err->show_line = false;
	snprintf(lx->err->msg, sizeof lx->err->msg,
		 "unexpected EOF while looking for matching `%c'", what);
	return KSH_SYNTAX;
}

static enum ksh_status backslash(struct ksh_lexer *lx);

/* Inside ${...} or $((...)): up to the closing `}` (or, for arithmetic,
 * `))`), over quotes, backslashes and nested expansions.  arith: *is_arith
 * turns false when a `)` closes what was a `$( (...) )` after all. */
static enum ksh_status skip_inside(struct ksh_lexer *lx, bool dq, bool arith, bool *is_arith)
{
	int parens = 0;
	bool inner_dq = false;
	while (lx->pos < lx->len) {
		char c = lx->s[lx->pos];
		enum ksh_status st = KSH_OK;
		if (c == '\\') {
			st = backslash(lx);
		} else if (c == '\'' && !dq && !inner_dq) {
			const char *end = memchr(lx->s + lx->pos + 1, '\'', lx->len - lx->pos - 1);
			if (!end) {
				lx->pos = lx->len;
				return KSH_MORE;
			}
			for (const char *q = lx->s + lx->pos; q < end; q++)
				lx->line += *q == '\n';
			lx->pos = (size_t)(end - lx->s) + 1;
		} else if (c == '"') {
			inner_dq = !inner_dq;
			lx->pos++;
		} else if (c == '$' || c == '`') {
			st = ksh_lex_skip_expansion(lx, dq || inner_dq);
		} else if (!arith && c == '}' && !inner_dq) {
			lx->pos++;
			return KSH_OK;
		} else if (arith && c == '(' && !inner_dq) {
			parens++;
			lx->pos++;
		} else if (arith && c == ')' && !inner_dq) {
			if (parens > 0) {
				parens--;
				lx->pos++;
			} else if (lx->pos + 1 < lx->len && lx->s[lx->pos + 1] == ')') {
				lx->pos += 2;
				return KSH_OK;
			} else if (lx->pos + 1 == lx->len && !lx->final) {
				return KSH_MORE;
			} else {
				*is_arith = false;
				return KSH_OK;
			}
		} else {
			lx->line += c == '\n';
			lx->pos++;
		}
		if (st != KSH_OK)
			return st;
	}
	return KSH_MORE;
}

static enum ksh_status backquoted(struct ksh_lexer *lx)
{
	int line = lx->line;
	lx->pos++;
	while (lx->pos < lx->len && lx->s[lx->pos] != '`') {
		if (lx->s[lx->pos] == '\\' && lx->pos + 1 < lx->len)
			lx->pos++;
		lx->line += lx->s[lx->pos] == '\n';
		lx->pos++;
	}
	if (lx->pos == lx->len) {
		lx->line = line;
		return eof_in(lx, line, '`');
	}
	lx->pos++;
	return KSH_OK;
}

enum ksh_status ksh_lex_skip_expansion(struct ksh_lexer *lx, bool dq)
{
	const char *s = lx->s;
	if (s[lx->pos] == '`')
		return backquoted(lx);
	size_t p = lx->pos + 1;
	int line = lx->line;
	enum ksh_status st;
	if (p < lx->len && s[p] == '(') {
		if (lx->depth >= KSH_MAX_DEPTH) {
			lx->err->line = lx->line;
			lx->err->show_line = true;
			snprintf(lx->err->msg, sizeof lx->err->msg,
				 "syntax error: expansions nested too deeply");
			return KSH_SYNTAX;
		}
		if (p + 1 < lx->len && s[p + 1] == '(') {
			bool is_arith = true;
			lx->pos = p + 2;
			st = skip_inside(lx, false, true, &is_arith);
			if (st == KSH_OK && is_arith) {
				lx->arith = true;
				return KSH_OK;
			}
			if (st == KSH_MORE) {
				lx->line = line;
				return eof_in(lx, line, ')');
			}
			if (st != KSH_OK)
				return st;
			lx->line = line; /* $( (...) ...): a command substitution */
		}
		lx->pos = p + 1;
		lx->arith = false;
		st = ksh_parse_subst(lx, lx->depth + 1);
		if (st == KSH_MORE) {
			/* bash names the line the input ends on */
			int end = lx->line;
			for (size_t i = lx->pos; i < lx->len; i++)
				end += s[i] == '\n';
			lx->line = line;
			return eof_in(lx, end + (lx->len && s[lx->len - 1] != '\n'), ')');
		}
		return st;
	}
	if (p == lx->len || s[p] != '{') {
		lx->pos = p; /* $ alone, or $NAME: what follows is lexed as usual */
		return KSH_OK;
	}
	lx->pos = p + 1;
	st = skip_inside(lx, dq, false, NULL);
	if (st == KSH_MORE) {
		lx->line = line;
		return eof_in(lx, line, '}');
	}
	return st;
}

static enum ksh_status dollar(struct ksh_lexer *lx, bool dq)
{
	return ksh_lex_skip_expansion(lx, dq);
}

/* A backslash-newline that ends the input joins it to a line to come. */
static bool joins_next_line(const struct ksh_lexer *lx)
{
	return !lx->final && lx->pos + 2 == lx->len && lx->s[lx->pos + 1] == '\n';
}

/* A backslash at lx->pos, outside single quotes: it and what it escapes. */
static enum ksh_status backslash(struct ksh_lexer *lx)
{
	if (lx->pos + 1 == lx->len) {
		if (!lx->final)
			return KSH_MORE;
		lx->pos++; /* a backslash that ends the input stands for itself */
		return KSH_OK;
	}
	if (joins_next_line(lx))
		return KSH_MORE;
	lx->line += lx->s[lx->pos + 1] == '\n';
	lx->pos += 2;
	return KSH_OK;
}

static enum ksh_status double_quoted(struct ksh_lexer *lx)
{
	int line = lx->line;
	lx->pos++;
	while (lx->pos < lx->len && lx->s[lx->pos] != '"') {
		char c = lx->s[lx->pos];
		enum ksh_status st = KSH_OK;
		if (c == '\\')
			st = backslash(lx);
		else if (c == '$' || c == '`')
			st = dollar(lx, true);
		else
			lx->line += c == '\n', lx->pos++;
		if (st != KSH_OK) {
			lx->line = line;
			return st == KSH_MORE ? eof_in(lx, line, '"') : st;
		}
	}
	if (lx->pos == lx->len) {
		lx->line = line;
		return eof_in(lx, line, '"');
	}
	lx->pos++;
	return KSH_OK;
}

/* c ends a word (a NUL does not: strchr would find the string's own) */
static bool ends_word(char c)
{
	return c && strchr(" \t\n;&|<>()", c);
}

static enum ksh_status word(struct ksh_lexer *lx)
{
	while (lx->pos < lx->len && !ends_word(lx->s[lx->pos])) {
		char c = lx->s[lx->pos];
		enum ksh_status st = KSH_OK;
		if (c == '\\') {
			st = backslash(lx);
		} else if (c == '\'') {
			int line = lx->line;
			const char *end = memchr(lx->s + lx->pos + 1, '\'', lx->len - lx->pos - 1);
			if (!end)
				return eof_in(lx, line, '\'');
			for (const char *p = lx->s + lx->pos; p < end; p++)
				lx->line += *p == '\n';
			lx->pos = (size_t)(end - lx->s) + 1;
		} else if (c == '"') {
			st = double_quoted(lx);
		} else if (c == '$' || c == '`') {
			st = dollar(lx, false);
		} else {
			lx->pos++;
		}
		if (st != KSH_OK)
			return st;
	}
	return KSH_OK;
}

struct op {
	const char *text;
	enum ksh_tok kind;
};

/* longest first, for each first character */
static const struct op ops[] = {
	{"&&", TK_AND_IF}, {"&", TK_AMP},     {"||", TK_OR_IF},   {"|", TK_PIPE},
	{";;", TK_DSEMI},  {";", TK_SEMI},    {"(", TK_LPAREN},   {")", TK_RPAREN},
	{"<<-", TK_DLESSDASH}, {"<<", TK_DLESS}, {"<&", TK_LESSAND}, {"<>", TK_LESSGREAT},
	{"<", TK_LESS},    {">>", TK_DGREAT}, {">&", TK_GREATAND}, {">|", TK_CLOBBER},
	{">", TK_GREAT},
};

enum ksh_status ksh_lex(struct ksh_lexer *lx, struct ksh_token *t)
{
	const char *s = lx->s;
	for (;;) {
		while (lx->pos < lx->len && (s[lx->pos] == ' ' || s[lx->pos] == '\t'))
			lx->pos++;
		if (lx->pos + 1 < lx->len && s[lx->pos] == '\\' && s[lx->pos + 1] == '\n') {
			if (joins_next_line(lx))
				return KSH_MORE;
			lx->pos += 2;
			lx->line++;
			continue;
		}
		if (lx->pos < lx->len && s[lx->pos] == '#')
			while (lx->pos < lx->len && s[lx->pos] != '\n')
				lx->pos++;
		break;
	}
	*t = (struct ksh_token){.text = s + lx->pos, .line = lx->line};
	if (lx->pos == lx->len) {
		t->kind = TK_EOF;
		return KSH_OK;
	}
	if (s[lx->pos] == '\n') {
		t->kind = TK_NEWLINE;
		t->len = 1;
		lx->pos++;
		lx->line++;
		return KSH_OK;
	}
	for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) {
		size_t n = strlen(ops[i].text);
		if (n <= lx->len - lx->pos && memcmp(s + lx->pos, ops[i].text, n) == 0) {
			t->kind = ops[i].kind;
			t->len = n;
			lx->pos += n;
			return KSH_OK;
		}
	}
	size_t start = lx->pos;
	enum ksh_status st = word(lx);
	if (st != KSH_OK)
		return st;
	t->kind = TK_WORD;
	t->len = lx->pos - start;
	if (lx->pos < lx->len && (s[lx->pos] == '<' || s[lx->pos] == '>') &&
	    strspn(t->text, "0123456789") >= t->len)
		t->kind = TK_IONUM;
	return KSH_OK;
}
