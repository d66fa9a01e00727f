/*
 * karui-sh's arithmetic: the expression of $((...)), after its own
 * expansion, evaluated in signed long as POSIX (XCU 2.6.4) and dash do.
 *
 *   primary  := NUMBER | NAME | '(' assign ')' | ('+' | '-' | '!' | '~') primary
 *   binary   := * / %, + -, << >>, < <= > >=, == !=, &, ^, |, &&, ||
 *               (C's precedence, left to right)
 *   ternary  := binary ('?' assign ':' ternary)?
 *   assign   := NAME ('=' | '*=' | '/=' | '%=' | '+=' | '-=' | '<<=' | '>>='
 *               | '&=' | '^=' | '|=') assign | ternary
 *
 * Recursive descent with one function per level; the depth of nesting
 * (parentheses, unary operators, assignments) is bounded so that no
 * expression exhausts the stack.  Numbers are decimal, octal (0...) or
 * hexadecimal (0x...); one too large for a long is the largest long, as
 * dash's strtoimax makes it.  A variable's value must be such a number
 * (optionally signed; empty or unset is 0) — dash's rule, not bash's,
 * which evaluates it as an expression.  Arithmetic wraps around (two's
 * complement) instead of being undefined; LONG_MIN / -1 is LONG_MIN.
 * What && || and ?: do not choose is parsed but not evaluated: no
 * assignment happens and no division by zero is an error there.
 *
 * Errors are worded as bash words them ("division by 0 (error token is
 * "0")"); the caller ends the command with status 2, as dash does.
 */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shell.h"

#define MAX_NEST 1000

struct ar {
	struct shell *sh;
	const char *s, *p;
	int nest;
	bool failed;
};

static void error(struct ar *a, const char *what, const char *token)
{
	if (a->failed)
		return;
	a->failed = true;
	while (token && *token == ' ')
		token++;
	if (token)
		ksh_say(a->sh, KSH_ERR(a->sh), "%s: %s (error token is \"%s\")", a->s, what, token);
	else
		ksh_say(a->sh, KSH_ERR(a->sh), "%s: %s", a->s, what);
}

static void blank(struct ar *a)
{
	while (*a->p && isspace((unsigned char)*a->p))
		a->p++;
}

/* The operator op here (and not a longer one that starts with it: | is
 * not ||, < not << or <=, + not +=, ...). */
static bool at_op(struct ar *a, const char *op)
{
	blank(a);
	size_t n = strlen(op);
	if (strncmp(a->p, op, n) != 0)
		return false;
	char next = a->p[n];
	if (n == 1 && strchr("|&<>", op[0]) && next == op[0])
		return false;
	bool comparison = strcmp(op, "==") == 0 || strcmp(op, "!=") == 0 ||
			  strcmp(op, "<=") == 0 || strcmp(op, ">=") == 0;
	return !(next == '=' && !comparison); /* an assignment operator */
}

static bool take(struct ar *a, const char *op)
{
	if (!at_op(a, op))
		return false;
	a->p += strlen(op);
	return true;
}

/* A number's text at s: 0 and *v (its end in *end), else -1. */
static int parse_number(const char *s, long *v, const char **end)
{
	int base = 10;
	const char *p = s;
	if (p[0] == '0' && (p[1] == 'x' || p[1] == 'X')) {
		base = 16;
		p += 2;
		if (!isxdigit((unsigned char)*p))
			return -1;
	} else if (p[0] == '0') {
		base = 8;
	}
	errno = 0;
	char *e;
	unsigned long long u = strtoull(p, &e, base);
	if (errno == ERANGE || u > LONG_MAX)
		u = LONG_MAX;
	if (isalnum((unsigned char)*e) || *e == '_')
		return -1;
	*v = (long)u;
	*end = e;
	return 0;
}

static long assign(struct ar *a, bool eval);

static long var_value(struct ar *a, const char *name, bool eval)
{
	const char *v = ksh_var_get(a->sh, name);
	if (!v && a->sh->opt_u && eval) {
		if (!a->failed)
			ksh_say(a->sh, KSH_ERR(a->sh), "%s: unbound variable", name);
		a->failed = true;
		return 0;
	}
	if (!v)
		return 0;
	const char *p = v;
	while (isspace((unsigned char)*p))
		p++;
	if (!*p)
		return 0;
	bool neg = *p == '-';
	if (*p == '-' || *p == '+')
		p++;
	long n;
	const char *end;
	if (parse_number(p, &n, &end) == 0) {
		while (isspace((unsigned char)*end))
			end++;
		if (!*end)
			return neg ? (long)(0UL - (unsigned long)n) : n;
	}
	if (eval && !a->failed) {
		ksh_say(a->sh, KSH_ERR(a->sh), "Illegal number: %s", v);
		a->failed = true;
	}
	return 0;
}

static bool name_here(struct ar *a, size_t *len)
{
	blank(a);
	size_t n = 0;
	while (ksh_valid_name(a->p, n + 1))
		n++;
	*len = n;
	return n > 0;
}

static long primary(struct ar *a, bool eval)
{
	blank(a);
	if (a->failed)
		return 0;
	if (++a->nest > MAX_NEST) {
		error(a, "expression nested too deeply", NULL);
		return 0;
	}
	long v = 0;
	const char *start = a->p;
	if (take(a, "(")) {
		v = assign(a, eval);
		if (!a->failed && !take(a, ")"))
			error(a, "missing `)'", a->p);
	} else if (*a->p == '+' || *a->p == '-' || *a->p == '!' || *a->p == '~') {
		char op = *a->p++;
		long x = primary(a, eval);
		v = op == '+' ? x : op == '-' ? (long)(0UL - (unsigned long)x) : op == '!' ? !x : ~x;
	} else if (isdigit((unsigned char)*a->p)) {
		const char *end;
		if (parse_number(a->p, &v, &end) < 0) {
			const char *e = a->p;
			while (isalnum((unsigned char)*e) || *e == '_')
				e++;
			char tok[64];
			snprintf(tok, sizeof tok, "%.*s", (int)(e - a->p), a->p);
			error(a, "value too great for base", tok);
		} else {
			a->p = end;
		}
	} else {
		size_t n;
		if (name_here(a, &n)) {
			char *name = ksh_strndup_x(a->p, n);
			a->p += n;
			v = var_value(a, name, eval);
			free(name);
		} else {
			error(a, "syntax error: operand expected", *start ? start : NULL);
		}
	}
	a->nest--;
	return v;
}

static long apply(struct ar *a, const char *op, long x, long y, bool eval, const char *ytext)
{
	unsigned long ux = (unsigned long)x, uy = (unsigned long)y;
	switch (op[0]) {
	case '*': return (long)(ux * uy);
	case '/':
	case '%':
		if (y == 0) {
			if (eval)
				error(a, "division by 0", ytext);
			return 0;
		}
		if (x == LONG_MIN && y == -1)
			return op[0] == '/' ? LONG_MIN : 0;
		return op[0] == '/' ? x / y : x % y;
	case '+': return (long)(ux + uy);
	case '-': return (long)(ux - uy);
	case '<':
		if (op[1] == '<')
			return (long)(ux << (uy & 63));
		return op[1] == '=' ? x <= y : x < y;
	case '>':
		if (op[1] == '>')
			return x >> (uy & 63);
		return op[1] == '=' ? x >= y : x > y;
	case '=': return x == y;
	case '!': return x != y;
	case '&': return x & y;
	case '^': return x ^ y;
	case '|': return x | y;
	}
	return 0;
}

/* levels, loosest first (|| and && are apart: they short-circuit) */
static const char *const levels[][5] = {
	{"|", NULL}, {"^", NULL}, {"&", NULL}, {"==", "!=", NULL},
	{"<=", ">=", "<", ">", NULL}, {"<<", ">>", NULL}, {"+", "-", NULL}, {"*", "/", "%", NULL},
};
#define NLEVELS (int)(sizeof levels / sizeof levels[0])

static long binary(struct ar *a, int level, bool eval)
{
	if (level == NLEVELS)
		return primary(a, eval);
	long x = binary(a, level + 1, eval);
	for (;;) {
		const char *op = NULL;
		for (int i = 0; levels[level][i]; i++)
			if (at_op(a, levels[level][i])) {
				op = levels[level][i];
				break;
			}
		if (!op || a->failed)
			return x;
		a->p += strlen(op);
		blank(a);
		const char *ytext = a->p;
		long y = binary(a, level + 1, eval);
		x = apply(a, op, x, y, eval, ytext);
	}
}

static long logical_and(struct ar *a, bool eval)
{
	long x = binary(a, 0, eval);
	while (!a->failed && take(a, "&&")) {
		long y = binary(a, 0, eval && x);
		x = x && y;
	}
	return x;
}

static long logical_or(struct ar *a, bool eval)
{
	long x = logical_and(a, eval);
	while (!a->failed && take(a, "||")) {
		long y = logical_and(a, eval && !x);
		x = x || y;
	}
	return x;
}

static long ternary(struct ar *a, bool eval)
{
	long c = logical_or(a, eval);
	if (a->failed || !take(a, "?"))
		return c;
	long x = assign(a, eval && c);
	if (a->failed)
		return 0;
	if (!take(a, ":")) {
		error(a, "`:' expected for conditional expression", *a->p ? a->p : NULL);
		return 0;
	}
	long y = ternary(a, eval && !c);
	return c ? x : y;
}

static const char *const assign_ops[] = {"<<=", ">>=", "*=", "/=", "%=", "+=", "-=",
					 "&=", "^=", "|=", "=", NULL};

static long assign(struct ar *a, bool eval)
{
	const char *save = a->p;
	size_t n;
	if (++a->nest > MAX_NEST) {
		error(a, "expression nested too deeply", NULL);
		return 0;
	}
	if (name_here(a, &n)) {
		const char *name = a->p;
		a->p += n;
		blank(a);
		for (int i = 0; assign_ops[i]; i++) {
			size_t ol = strlen(assign_ops[i]);
			if (strncmp(a->p, assign_ops[i], ol) != 0 || (ol == 1 && a->p[1] == '='))
				continue;
			a->p += ol;
			char *nm = ksh_strndup_x(name, n);
			blank(a);
			const char *ytext = a->p;
			long y = assign(a, eval);
			long v = y;
			if (ol > 1) {
				char op[3] = {assign_ops[i][0], ol == 3 ? assign_ops[i][1] : 0, 0};
				v = apply(a, op, var_value(a, nm, eval), y, eval, ytext);
			}
			if (eval && !a->failed) {
				char buf[32];
				snprintf(buf, sizeof buf, "%ld", v);
				ksh_var_set(a->sh, nm, buf, false);
			}
			free(nm);
			a->nest--;
			return v;
		}
		a->p = save;
	}
	long v = ternary(a, eval);
	a->nest--;
	return v;
}

int ksh_arith(struct shell *sh, const char *expr, long *out)
{
	struct ar a = {.sh = sh, .s = expr, .p = expr};
	blank(&a);
	if (!*a.p) {
		error(&a, "syntax error: operand expected", NULL); /* dash's: no operand */
		return -1;
	}
	long v = assign(&a, true);
	blank(&a);
	if (!a.failed && *a.p) {
		if (strchr("=", *a.p) || (a.p[1] == '=' && strchr("*/%+-&^|", *a.p)))
			error(&a, "attempted assignment to non-variable", a.p);
		else
			error(&a, "syntax error in expression", a.p);
	}
	if (a.failed)
		return -1;
	*out = v;
	return 0;
}
