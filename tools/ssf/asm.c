/*
 * SSF's assembler: the text of a program to an array of instructions.
 *
 * One statement a line; `;` starts a comment.
 *
 *   NAME:                  a label: the address of the next instruction
 *   .equ NAME, VALUE       a constant (a number, or a name defined above)
 *   li   rd, imm           rd = imm
 *   add  rd, ra, rb        rd = ra + rb      (sub: ra - rb;  slt: ra < rb)
 *   addi rd, ra, imm       rd = ra + imm
 *   ld   rd, imm(ra)       rd = mem[ra + imm]
 *   st   rs, imm(ra)       mem[ra + imm] = rs
 *   tas  rd, imm(ra)       rd = mem[ra + imm], mem[ra + imm] = 1, atomically
 *   beq  ra, rb, label     branch if equal   (bne: unequal; blt: ra < rb, signed)
 *   jmp  label
 *   halt
 *
 * Registers r0..r15, r0 reads as zero.  Memory is word-addressed; an
 * immediate is a decimal number (maybe negative) or a name.  Two passes:
 * the first finds the labels, the second encodes, so a branch may name a
 * label further down.  Errors name the line.
 */
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ssf_impl.h"

/* Operand shapes: r register, i immediate, m imm(reg), l label. */
static const struct {
	const char *name, *shape;
} OPS[SSF_NOPS] = {
	[SSF_HALT] = {"halt", ""},      [SSF_LI] = {"li", "ri"},
	[SSF_ADD] = {"add", "rrr"},     [SSF_ADDI] = {"addi", "rri"},
	[SSF_SUB] = {"sub", "rrr"},     [SSF_SLT] = {"slt", "rrr"},
	[SSF_LD] = {"ld", "rm"},        [SSF_ST] = {"st", "rm"},
	[SSF_TAS] = {"tas", "rm"},      [SSF_BEQ] = {"beq", "rrl"},
	[SSF_BNE] = {"bne", "rrl"},     [SSF_BLT] = {"blt", "rrl"},
	[SSF_JMP] = {"jmp", "l"},
};

#define NAMES_MAX 128
#define NAME_LEN 32
#define LINE_LEN 160

struct as {
	struct { char name[NAME_LEN]; int32_t v; } sym[NAMES_MAX];
	unsigned nsym, line;
	char *why;
	size_t len;
};

static int fail(struct as *a, const char *fmt, ...)
{
	int k = snprintf(a->why, a->len, "line %u: ", a->line);
	va_list ap;
	va_start(ap, fmt);
	if (k >= 0 && (size_t)k < a->len)
		vsnprintf(a->why + k, a->len - k, fmt, ap);
	va_end(ap);
	return EINVAL;
}

static const int32_t *lookup(const struct as *a, const char *name)
{
	for (unsigned i = 0; i < a->nsym; i++)
		if (strcmp(a->sym[i].name, name) == 0)
			return &a->sym[i].v;
	return NULL;
}

static int define(struct as *a, const char *name, int32_t v)
{
	if (lookup(a, name))
		return fail(a, "%s defined twice", name);
	if (a->nsym == NAMES_MAX || strlen(name) >= NAME_LEN)
		return fail(a, "too many names, or %s too long", name);
	strcpy(a->sym[a->nsym].name, name);
	a->sym[a->nsym++].v = v;
	return 0;
}

static char *trim(char *s)
{
	while (isspace((unsigned char)*s))
		s++;
	char *e = s + strlen(s);
	while (e > s && isspace((unsigned char)e[-1]))
		*--e = 0;
	return s;
}

static int is_name(const char *s)
{
	if (!isalpha((unsigned char)*s) && *s != '_')
		return 0;
	for (; *s; s++)
		if (!isalnum((unsigned char)*s) && *s != '_')
			return 0;
	return 1;
}

static int reg(struct as *a, const char *s, uint8_t *r)
{
	char *end;
	if (s[0] != 'r' || !isdigit((unsigned char)s[1]))
		return fail(a, "'%s' is no register", s);
	long v = strtol(s + 1, &end, 10);
	if (*end || v >= SSF_REGS)
		return fail(a, "'%s' is no register (r0..r%d)", s, SSF_REGS - 1);
	*r = (uint8_t)v;
	return 0;
}

/* A number or a name; in the first pass (`known` 0) names may be unknown. */
static int imm(struct as *a, const char *s, int32_t *v, int known)
{
	char *end;
	if (isdigit((unsigned char)*s) || *s == '-') {
		long x = strtol(s, &end, 10);
		if (*end || x < INT32_MIN || x > INT32_MAX)
			return fail(a, "'%s' is no number", s);
		*v = (int32_t)x;
		return 0;
	}
	const int32_t *p = is_name(s) ? lookup(a, s) : NULL;
	if (p)
		*v = *p;
	else if (known || !is_name(s))
		return fail(a, "'%s' is not defined", s);
	return 0;
}

static int operand(struct as *a, char kind, char *s, ssf_insn *in, int slot, int known)
{
	uint8_t *regs[3] = {&in->rd, &in->ra, &in->rb};
	if (kind == 'r')
		return reg(a, s, regs[slot]);
	if (kind == 'i' || kind == 'l')
		return imm(a, s, &in->imm, known);
	/* m: imm(reg) */
	char *open = strchr(s, '('), *close = strrchr(s, ')');
	if (!open || !close || close[1] || close < open)
		return fail(a, "'%s' is not imm(reg)", s);
	*open = *close = 0;
	int e = imm(a, trim(s), &in->imm, known);
	return e ? e : reg(a, trim(open + 1), &in->ra);
}

/* One statement; *pc counts instructions.  out NULL: the first pass. */
static int statement(struct as *a, char *s, ssf_insn *out, unsigned *pc)
{
	char *colon = strchr(s, ':');
	if (colon) {
		*colon = 0;
		char *name = trim(s);
		if (!is_name(name))
			return fail(a, "'%s' is no label", name);
		if (!out) {
			int e = define(a, name, (int32_t)*pc);
			if (e)
				return e;
		}
		s = trim(colon + 1);
	}
	if (!*s)
		return 0;
	char *args = s + strcspn(s, " \t");
	if (*args)
		*args++ = 0;
	char *arg[4];
	int n = 0;
	for (char *t = trim(args); *t && n < 4;) {
		char *c = strchr(t, ',');
		if (c)
			*c = 0;
		arg[n++] = trim(t);
		t = c ? c + 1 : t + strlen(t);
	}
	if (strcmp(s, ".equ") == 0) {
		int32_t v = 0;
		if (n != 2 || !is_name(arg[0]))
			return fail(a, ".equ takes NAME, VALUE");
		if (out)
			return 0;
		int e = imm(a, arg[1], &v, 1);
		return e ? e : define(a, arg[0], v);
	}
	int op = 0;
	while (op < SSF_NOPS && strcmp(OPS[op].name, s) != 0)
		op++;
	if (op == SSF_NOPS)
		return fail(a, "unknown instruction '%s'", s);
	const char *shape = OPS[op].shape;
	if ((size_t)n != strlen(shape))
		return fail(a, "%s takes %zu operands", s, strlen(shape));
	ssf_insn in = {.op = (uint8_t)op};
	int rslot = 0;
	for (int i = 0; i < n; i++) {
		int e = operand(a, shape[i], arg[i], &in, shape[i] == 'r' ? rslot++ : 0,
				out != NULL);
		if (e)
			return e;
	}
	/* branches compare ra with rb: shift the two registers read */
	if (op == SSF_BEQ || op == SSF_BNE || op == SSF_BLT)
		in.rb = in.ra, in.ra = in.rd, in.rd = 0;
	if (out)
		out[*pc] = in;
	++*pc;
	return 0;
}

static int pass(struct as *a, const char *text, ssf_insn *out, unsigned *pc)
{
	char buf[LINE_LEN];
	*pc = 0;
	a->line = 0;
	for (const char *p = text; *p;) {
		size_t k = strcspn(p, "\n");
		a->line++;
		if (k >= sizeof buf)
			return fail(a, "line too long");
		memcpy(buf, p, k);
		buf[k] = 0;
		p += k + (p[k] == '\n');
		buf[strcspn(buf, ";")] = 0;
		int e = statement(a, trim(buf), out, pc);
		if (e)
			return e;
	}
	return 0;
}

int ssf_assemble(const char *text, ssf_insn **out, unsigned *n, char *why, size_t len)
{
	struct as *a = calloc(1, sizeof *a);
	unsigned count;
	if (!a)
		return ENOMEM;
	a->why = why;
	a->len = len;
	int e = pass(a, text, NULL, &count);
	ssf_insn *code = NULL;
	if (!e && count == 0)
		e = fail(a, "no instructions");
	if (!e && !(code = calloc(count, sizeof *code)))
		e = ENOMEM;
	if (!e)
		e = pass(a, text, code, &count);
	for (unsigned i = 0; !e && i < count; i++) {
		int op = code[i].op;
		int branch = op == SSF_BEQ || op == SSF_BNE || op == SSF_BLT || op == SSF_JMP;
		if (branch && (code[i].imm < 0 || (unsigned)code[i].imm >= count)) {
			snprintf(why, len, "instruction %u jumps to %d, outside the program", i,
				 (int)code[i].imm);
			e = EINVAL;
		}
	}
	free(a);
	if (e) {
		free(code);
		return e;
	}
	*out = code;
	*n = count;
	return 0;
}
