/*
 * The image layer's x86-64 length decoder (src/image/x86dec.c): walking
 * the code of ld.so, libc and three Debian programs one decoded length at
 * a time lands on exactly the instructions objdump prints, with the same
 * branch kinds and targets, syscall and cpuid sites and %rip-relative
 * operands; and the encodings where a length decoder most easily goes
 * wrong, written out by hand.
 */
#define _GNU_SOURCE
#include <elf.h>

#include <dlfcn.h>
#include <link.h>

#include "kt.h"
#include "uproc.h"

/* ---------------- hand-written encodings ---------------- */

struct want {
	int len, kind, riprel;
	int64_t target;
};

static void check(const uint8_t *b, size_t n, struct want w)
{
	struct kr__insn in;
	int len = kr__x86_decode(b, n, &in);
	KT_EQ(len, w.len);
	KT_EQ(in.len, w.len);
	KT_EQ(in.kind, w.kind);
	KT_EQ(in.riprel, w.riprel);
	KT_EQ(in.target, w.target);
}
#define CHECK(w, ...)                                                          \
	do {                                                                   \
		static const uint8_t b_[] = {__VA_ARGS__};                     \
		check(b_, sizeof b_, (struct want)w);                          \
	} while (0)
#define W(...) {__VA_ARGS__}

/* EVEX: four bytes of prefix before the opcode; a disp8 stays one byte
 * (it is scaled, not widened) */
static void evex_with_disp8_is_eight_bytes(void)
{
	/* vmovups 0x40(%rsp),%zmm0 */
	CHECK(W(8, KR_INSN_OTHER), 0x62, 0xf1, 0x7c, 0x48, 0x10, 0x44, 0x24, 0x01);
	/* vpcmpeqb 0x20(%rdi),%ymm16,%k1: map 0f, no immediate */
	CHECK(W(7, KR_INSN_OTHER), 0x62, 0xb1, 0x7d, 0x20, 0x74, 0x4f, 0x01);
	/* vpcmpnequb (%rsi),%zmm16,%k1 (vpcmpub $4): map 0f3a, imm8 */
	CHECK(W(7, KR_INSN_OTHER), 0x62, 0xb3, 0x7d, 0x40, 0x3e, 0x0e, 0x04);
	/* vpternlogd $0xde,%zmm2,%zmm1,%zmm3 */
	CHECK(W(7, KR_INSN_OTHER), 0x62, 0xf3, 0x75, 0x48, 0x25, 0xda, 0xde);
}

/* VEX: c4 names the map; map 0f3a always carries an imm8 */
static void vex3_map3_carries_imm8(void)
{
	/* vpalignr $0x8,%xmm1,%xmm0,%xmm0 */
	CHECK(W(6, KR_INSN_OTHER), 0xc4, 0xe3, 0x79, 0x0f, 0xc1, 0x08);
	/* vpalignr $0x8,0x10(%rip),%xmm0,%xmm0 */
	CHECK(W(10, KR_INSN_OTHER, 1), 0xc4, 0xe3, 0x79, 0x0f, 0x05, 0x10, 0, 0, 0, 0x08);
	/* vpshufd $0x1b,%ymm1,%ymm0 (c5, map 0f, an opcode with imm8) */
	CHECK(W(5, KR_INSN_OTHER), 0xc5, 0xfd, 0x70, 0xc1, 0x1b);
	/* vzeroupper: no ModRM */
	CHECK(W(3, KR_INSN_OTHER), 0xc5, 0xf8, 0x77);
	/* andn (map 0f38): ModRM, no immediate */
	CHECK(W(5, KR_INSN_OTHER), 0xc4, 0xe2, 0x78, 0xf2, 0xc1);
}

/* 66 shrinks imm32 to imm16, unless REX.W makes the operand 64-bit */
static void rex_w_overrides_66_for_the_immediate(void)
{
	/* data16 mov $0x12345678,%rax */
	CHECK(W(8, KR_INSN_OTHER), 0x66, 0x48, 0xc7, 0xc0, 0x78, 0x56, 0x34, 0x12);
	/* mov $0x1234,%ax */
	CHECK(W(5, KR_INSN_OTHER), 0x66, 0xc7, 0xc0, 0x34, 0x12);
	/* movabs $0x0102030405060708,%rax; mov $0x1234,%ax; mov $1,%eax */
	CHECK(W(10, KR_INSN_OTHER), 0x48, 0xb8, 8, 7, 6, 5, 4, 3, 2, 1);
	CHECK(W(4, KR_INSN_OTHER), 0x66, 0xb8, 0x34, 0x12);
	CHECK(W(5, KR_INSN_OTHER), 0xb8, 1, 0, 0, 0);
	/* a REX before another prefix is ignored (by the CPU; objdump lists
	 * it as an instruction of its own): no imm64 here */
	CHECK(W(7, KR_INSN_OTHER), 0x48, 0x2e, 0xb8, 1, 0, 0, 0);
}

/* a0-a3 take a full 8-byte address, 4 bytes under 67 */
static void moffs_is_eight_bytes_four_under_67(void)
{
	/* movabs 0x1122334455667788,%eax */
	CHECK(W(9, KR_INSN_OTHER), 0xa1, 0x88, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11);
	/* movabs %rax,0x1122334455667788 */
	CHECK(W(10, KR_INSN_OTHER), 0x48, 0xa3, 0x88, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22,
	      0x11);
	/* addr32 mov 0x11223344,%eax */
	CHECK(W(6, KR_INSN_OTHER), 0x67, 0xa1, 0x44, 0x33, 0x22, 0x11);
}

/* f6/f7 carry an immediate for test (/0, /1) only */
static void group3_has_immediate_only_for_test(void)
{
	CHECK(W(3, KR_INSN_OTHER), 0xf6, 0xc1, 0x01);             /* test $1,%cl */
	CHECK(W(2, KR_INSN_OTHER), 0xf6, 0xd1);                   /* not %cl */
	CHECK(W(6, KR_INSN_OTHER), 0xf7, 0xc1, 0x78, 0x56, 0x34, 0x12); /* test $..,%ecx */
	CHECK(W(5, KR_INSN_OTHER), 0x66, 0xf7, 0xc1, 0x34, 0x12); /* test $0x1234,%cx */
	CHECK(W(3, KR_INSN_OTHER), 0x48, 0xf7, 0xf1);             /* div %rcx */
	/* testb $0x4,0x10(%rip) */
	CHECK(W(7, KR_INSN_OTHER, 1), 0xf6, 0x05, 0x10, 0, 0, 0, 0x04);
}

/* mod 00 rm 101 is %rip + disp32; SIB base 101 under mod 00 is an absolute
 * disp32, not %rip-relative; 0f 20-23 read ModRM.mod as 11 */
static void modrm_rip_relative_and_sib_disp32(void)
{
	/* mov 0x10(%rip),%rax */
	CHECK(W(7, KR_INSN_OTHER, 1), 0x48, 0x8b, 0x05, 0x10, 0, 0, 0);
	/* mov 0x0,%eax (SIB, no base) */
	CHECK(W(7, KR_INSN_OTHER, 0), 0x8b, 0x04, 0x25, 0, 0, 0, 0);
	/* mov 0x8(%rsp),%eax; mov 0x100(%rbp,%rcx,4),%eax */
	CHECK(W(4, KR_INSN_OTHER), 0x8b, 0x44, 0x24, 0x08);
	CHECK(W(7, KR_INSN_OTHER), 0x8b, 0x84, 0x8d, 0, 1, 0, 0);
	/* mov %cr0,%rbp: mod 00 does not mean memory here */
	CHECK(W(3, KR_INSN_OTHER), 0x0f, 0x20, 0x05);
	/* call *0x10(%rip); notrack jmp *%rax */
	CHECK(W(6, KR_INSN_CALL_IND, 1), 0xff, 0x15, 0x10, 0, 0, 0);
	CHECK(W(3, KR_INSN_JMP_IND), 0x3e, 0xff, 0xe0);
}

static void branches_give_targets_from_the_instruction_start(void)
{
	CHECK(W(5, KR_INSN_CALL, 0, 5), 0xe8, 0, 0, 0, 0);
	CHECK(W(5, KR_INSN_JMP, 0, -0x10 + 5), 0xe9, 0xf0, 0xff, 0xff, 0xff);
	CHECK(W(2, KR_INSN_JMP, 0, 0), 0xeb, 0xfe);
	CHECK(W(6, KR_INSN_JCC, 0, 0x16), 0x0f, 0x84, 0x10, 0, 0, 0);
	CHECK(W(2, KR_INSN_JCC, 0, 4), 0xe3, 0x02);           /* jrcxz */
	CHECK(W(3, KR_INSN_JCC, 0, 3 - 5), 0x2e, 0x75, 0xfb); /* hinted jne */
	CHECK(W(7, KR_INSN_JMP, 0, 7), 0xf2, 0x2e, 0xe9, 0, 0, 0, 0); /* bnd jmp */
	CHECK(W(3, KR_INSN_RET), 0xc2, 0x08, 0x00);
	CHECK(W(2, KR_INSN_RET), 0xf3, 0xc3);
	CHECK(W(4, KR_INSN_OTHER), 0xc8, 0x10, 0x00, 0x01);  /* enter $0x10,$1 */
	CHECK(W(2, KR_INSN_SYSCALL), 0x0f, 0x05);
	CHECK(W(2, KR_INSN_CPUID), 0x0f, 0xa2);
	CHECK(W(2, KR_INSN_UD), 0x0f, 0x0b);
	CHECK(W(1, KR_INSN_UD), 0xcc);
}

/* what 64-bit mode does not have, what the CPUs disagree on, what does not
 * fit: not decoded */
static void invalid_unknown_and_truncated_decode_as_zero(void)
{
	static const uint8_t invalid[][3] = {
		{0x06}, {0x27}, {0x60}, {0x62, 0xf4, 0x7c}, /* push es, daa, pusha, EVEX map 4 */
		{0x9a}, {0xce}, {0xd4, 0x0a}, {0xea},       /* callf, into, aam, jmpf */
		{0xff, 0xf8}, {0xfe, 0xd0}, {0xff, 0xd8},   /* ff /7, fe /2, lcall *%rax */
		{0x66, 0xe8}, {0x8f, 0xe9, 0x78},           /* callw, XOP */
		{0x66, 0xc5, 0xf8}, {0x48, 0xc5, 0xf8},     /* VEX after 66, after REX */
		{0x0f, 0x04}, {0x0f, 0xb8},                 /* 0f 04, jmpe */
	};
	struct kr__insn in;
	uint8_t buf[32];
	for (size_t k = 0; k < sizeof invalid / sizeof invalid[0]; k++) {
		memset(buf, 0, sizeof buf);
		memcpy(buf, invalid[k], 3);
		KT_EQ(kr__x86_decode(buf, sizeof buf, &in), 0);
		KT_EQ(in.len, 0);
	}
	/* movabs $imm64,%rax in fewer bytes than it needs */
	static const uint8_t mov[] = {0x48, 0xb8, 1, 2, 3, 4, 5, 6, 7, 8};
	for (size_t n = 0; n < sizeof mov; n++)
		KT_EQ(kr__x86_decode(mov, n, &in), 0);
	KT_EQ(kr__x86_decode(mov, sizeof mov, &in), 10);
	/* 15 bytes is the limit: 14 prefixes and a nop decode, 15 do not */
	memset(buf, 0x66, sizeof buf);
	buf[14] = 0x90;
	KT_EQ(kr__x86_decode(buf, sizeof buf, &in), 15);
	buf[14] = 0x66;
	buf[15] = 0x90;
	KT_EQ(kr__x86_decode(buf, sizeof buf, &in), 0);
}

/* ---------------- whole files against objdump ---------------- */

struct sec {
	char name[64];
	uint64_t addr, size;
	const uint8_t *bytes;
};

struct tally {
	long insns, bad, unknown, len_wrong, kind_wrong, target_wrong, rip_wrong;
	long kinds[16];
	uint64_t prev;  /* the last instruction decoded, and objdump's text */
	char prevtext[512];
};

static uint8_t *read_all(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return NULL;
	fseek(f, 0, SEEK_END);
	long n = ftell(f);
	fseek(f, 0, SEEK_SET);
	uint8_t *b = malloc((size_t)n);
	KT_CHECK(b && fread(b, 1, (size_t)n, f) == (size_t)n);
	fclose(f);
	*len = (size_t)n;
	return b;
}

/* the executable sections, as objdump -d names them */
static int exec_sections(const uint8_t *f, size_t len, struct sec *s, int max)
{
	const Elf64_Ehdr *eh = (const void *)f;
	KT_CHECK(len > sizeof *eh && memcmp(eh->e_ident, ELFMAG, SELFMAG) == 0);
	KT_CHECK(eh->e_ident[EI_CLASS] == ELFCLASS64 && eh->e_machine == EM_X86_64);
	KT_CHECK(eh->e_shoff + (uint64_t)eh->e_shnum * sizeof(Elf64_Shdr) <= len);
	const Elf64_Shdr *sh = (const void *)(f + eh->e_shoff);
	const char *names = (const char *)f + sh[eh->e_shstrndx].sh_offset;
	int n = 0;
	for (int k = 0; k < eh->e_shnum; k++) {
		if (sh[k].sh_type != SHT_PROGBITS || !(sh[k].sh_flags & SHF_EXECINSTR))
			continue;
		KT_CHECK(n < max && sh[k].sh_offset + sh[k].sh_size <= len);
		snprintf(s[n].name, sizeof s[n].name, "%s", names + sh[k].sh_name);
		s[n].addr = sh[k].sh_addr;
		s[n].size = sh[k].sh_size;
		s[n].bytes = f + sh[k].sh_offset;
		n++;
	}
	return n;
}

/* The kind objdump's mnemonic names; prefixes it prints as words skipped.
 * *op: the first operand. */
static int objdump_kind(char *text, char **op)
{
	static const char *const pfx[] = {
		"cs", "ds", "es", "ss", "fs", "gs", "data16", "data32", "addr32",
		"lock", "rep", "repz", "repnz", "repe", "repne", "bnd", "notrack",
		"xacquire", "xrelease", "{vex}", "{vex3}", "{evex}", NULL};
	char *save = NULL, *m;
	for (m = strtok_r(text, " ", &save); m; m = strtok_r(NULL, " ", &save)) {
		int skip = strncmp(m, "rex", 3) == 0;
		for (int k = 0; pfx[k] && !skip; k++)
			skip = strcmp(m, pfx[k]) == 0;
		if (!skip)
			break;
	}
	if (!m)
		return -1;
	*op = strtok_r(NULL, " ", &save);
	if (!*op)
		*op = "";
	int ind = (*op)[0] == '*';
	if (!strcmp(m, "jmp") || !strcmp(m, "jmpq"))
		return ind ? KR_INSN_JMP_IND : KR_INSN_JMP;
	if (!strcmp(m, "call") || !strcmp(m, "callq"))
		return ind ? KR_INSN_CALL_IND : KR_INSN_CALL;
	if (!strcmp(m, "ljmp") || !strcmp(m, "ljmpq"))
		return KR_INSN_JMP_IND;
	if (!strcmp(m, "lcall") || !strcmp(m, "lcallq"))
		return KR_INSN_CALL_IND;
	if (m[0] == 'j' || !strncmp(m, "loop", 4))
		return KR_INSN_JCC;
	if (!strcmp(m, "ret") || !strcmp(m, "retq") || !strcmp(m, "retw") ||
	    !strcmp(m, "lret") || !strcmp(m, "lretq") || !strcmp(m, "lretw"))
		return KR_INSN_RET;
	if (!strcmp(m, "syscall"))
		return KR_INSN_SYSCALL;
	if (!strcmp(m, "cpuid"))
		return KR_INSN_CPUID;
	if (!strcmp(m, "ud0") || !strcmp(m, "ud1") || !strcmp(m, "ud2") ||
	    !strcmp(m, "int3") || !strcmp(m, "int1") || !strcmp(m, "icebp") ||
	    !strcmp(m, "hlt"))
		return KR_INSN_UD;
	return KR_INSN_OTHER;
}

static void show(const char *what, const struct sec *s, uint64_t a, const char *text,
		 long count)
{
	if (count > 20)
		return;
	fprintf(stderr, "  %s at %s+%#llx (%#llx):", what, s->name,
		(unsigned long long)(a - s->addr), (unsigned long long)a);
	for (uint64_t k = a; k < a + 15 && k < s->addr + s->size; k++)
		fprintf(stderr, " %02x", s->bytes[k - s->addr]);
	fprintf(stderr, "  [objdump: %s]\n", text);
}

/* One line of objdump's listing: the instruction at a in s. */
static void compare_one(const struct sec *s, uint64_t a, char *text, uint64_t *next,
			struct tally *t)
{
	char copy[512];
	snprintf(copy, sizeof copy, "%s", text);
	if (*next != UINT64_MAX && *next != a)
		show("length differs", s, t->prev, t->prevtext, ++t->len_wrong);
	*next = UINT64_MAX; /* resynchronise at objdump's next line */
	if (strncmp(text, "(bad)", 5) == 0) {
		t->bad++;
		return;
	}
	t->insns++;
	struct kr__insn in;
	int len = kr__x86_decode(s->bytes + (a - s->addr), s->addr + s->size - a, &in);
	if (len == 0) {
		show("not decoded", s, a, copy, ++t->unknown);
		return;
	}
	*next = a + (uint64_t)len;
	t->prev = a;
	memcpy(t->prevtext, copy, sizeof copy);
	int rip = strstr(text, "(%rip)") || strstr(text, "(%eip)");
	if (rip != in.riprel)
		show("rip-relative differs", s, a, copy, ++t->rip_wrong);
	char *op;
	int kind = objdump_kind(text, &op);
	if (kind != in.kind) {
		show("kind differs", s, a, copy, ++t->kind_wrong);
		return;
	}
	t->kinds[in.kind]++;
	if (kind == KR_INSN_JMP || kind == KR_INSN_JCC || kind == KR_INSN_CALL) {
		char *end;
		unsigned long long to = strtoull(op, &end, 16);
		if (end == op || to != a + (uint64_t)in.target)
			show("target differs", s, a, copy, ++t->target_wrong);
	}
}

static void compare_with_objdump(const char *path, int unknowns_allowed)
{
	if (system("command -v objdump >/dev/null 2>&1") != 0)
		KT_SKIP("no objdump (binutils)");
	size_t flen;
	uint8_t *f = read_all(path, &flen);
	if (!f)
		KT_SKIP("file absent");
	struct sec secs[32];
	int nsec = exec_sections(f, flen, secs, 32);
	KT_CHECK(nsec > 0);

	char cmd[512];
	snprintf(cmd, sizeof cmd, "LC_ALL=C objdump -d --no-show-raw-insn -w '%s'", path);
	FILE *od = popen(cmd, "r");
	KT_CHECK(od);
	struct tally t = {0};
	const struct sec *cur = NULL;
	uint64_t next = UINT64_MAX;
	char line[4096];
	while (fgets(line, sizeof line, od)) {
		line[strcspn(line, "\n")] = 0;
		char name[128];
		if (sscanf(line, "Disassembly of section %127[^:]:", name) == 1) {
			cur = NULL;
			for (int k = 0; k < nsec; k++)
				if (strcmp(secs[k].name, name) == 0)
					cur = &secs[k];
			KT_CHECK(cur);
			next = cur->addr;
			continue;
		}
		char *p = line, *end;
		while (*p == ' ')
			p++;
		unsigned long long a = strtoull(p, &end, 16);
		if (end == p || end[0] != ':' || end[1] != '\t' || !cur)
			continue;
		KT_CHECK(a >= cur->addr && a < cur->addr + cur->size);
		compare_one(cur, a, end + 2, &next, &t);
	}
	KT_EQ(pclose(od), 0);
	printf("  %s: %ld instructions (%ld direct jumps, %ld conditional, %ld calls, "
	       "%ld syscall, %ld cpuid), %ld (bad), %ld not decoded\n",
	       path, t.insns, t.kinds[KR_INSN_JMP], t.kinds[KR_INSN_JCC],
	       t.kinds[KR_INSN_CALL], t.kinds[KR_INSN_SYSCALL], t.kinds[KR_INSN_CPUID],
	       t.bad, t.unknown);
	fflush(stdout);
	KT_CHECK(t.insns > 10000);
	KT_EQ(t.len_wrong, 0);
	KT_EQ(t.kind_wrong, 0);
	KT_EQ(t.target_wrong, 0);
	KT_EQ(t.rip_wrong, 0);
	if (!unknowns_allowed)
		KT_EQ(t.unknown, 0);
	free(f);
}

/* The image layer saves no vector state for a system call made inside a
 * C library's wrapper that uses none (read, write, ...), and saves it
 * everywhere else: this process's own libc, as a μprocess's would be. */
static int libc_base(struct dl_phdr_info *i, size_t n, void *out)
{
	(void)n;
	if (strstr(i->dlpi_name, "libc.so"))
		*(uintptr_t *)out = i->dlpi_addr;
	return 0;
}

static uintptr_t syscall_in(void *fn)
{
	const uint8_t *p = fn;
	struct kr__insn in;
	for (int i = 0; i < 64; i++, p += in.len) {
		KT_CHECK(kr__x86_decode(p, 16, &in) > 0);
		if (in.kind == KR_INSN_SYSCALL)
			return (uintptr_t)p;
	}
	return 0;
}

static void wrapper_sites_need_no_vector_state_others_do(void)
{
	uintptr_t base = 0;
	dl_iterate_phdr(libc_base, &base);
	KT_CHECK(base);
	/* libc's own symbols (a sanitizer's runtime interposes read and write) */
	void *libc = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
	KT_CHECK(libc);
	uintptr_t w = syscall_in(dlsym(libc, "write"));
	uintptr_t r = syscall_in(dlsym(libc, "read"));
	uintptr_t g = syscall_in(dlsym(libc, "getppid"));
	KT_CHECK(w && r && g);
	KT_EQ(kr__rw_novec_site(base, w), 1);
	KT_EQ(kr__rw_novec_site(base, r), 1);
	KT_EQ(kr__rw_novec_site(base, g), 0); /* not a listed wrapper */
}

static void ld_so_decodes_as_objdump_does(void)
{
	compare_with_objdump("/lib64/ld-linux-x86-64.so.2", 0);
}
static void libc_decodes_as_objdump_does(void)
{
	compare_with_objdump("/lib/x86_64-linux-gnu/libc.so.6", 0);
}
static void grep_decodes_as_objdump_does(void)
{
	compare_with_objdump("/usr/bin/grep", 1);
}
static void sort_decodes_as_objdump_does(void)
{
	compare_with_objdump("/usr/bin/sort", 1);
}
static void bash_decodes_as_objdump_does(void)
{
	compare_with_objdump("/bin/bash", 1);
}

int main(int argc, char **argv)
{
	kt_args(argc, argv);
	KT_RUN(evex_with_disp8_is_eight_bytes);
	KT_RUN(vex3_map3_carries_imm8);
	KT_RUN(rex_w_overrides_66_for_the_immediate);
	KT_RUN(moffs_is_eight_bytes_four_under_67);
	KT_RUN(group3_has_immediate_only_for_test);
	KT_RUN(modrm_rip_relative_and_sib_disp32);
	KT_RUN(branches_give_targets_from_the_instruction_start);
	KT_RUN(invalid_unknown_and_truncated_decode_as_zero);
	KT_RUN(wrapper_sites_need_no_vector_state_others_do);
	KT_RUN_T(ld_so_decodes_as_objdump_does, 300);
	KT_RUN_T(libc_decodes_as_objdump_does, 300);
	KT_RUN_T(grep_decodes_as_objdump_does, 300);
	KT_RUN_T(sort_decodes_as_objdump_does, 300);
	KT_RUN_T(bash_decodes_as_objdump_does, 300);
	return kt_finish();
}
