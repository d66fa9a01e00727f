/*
 * SSF (tools/ssf): the simulated programs' results are right, every back
 * end gives the same simulation, the machine switches every agent once a
 * cycle, and bad input is refused, by the assembler as by ssf_run.
 */
#include "kt.h"

#include "karui.h"
#include "ssf_impl.h"

/* prog on every back end: each run's check passes and all agree */
static void run_everywhere(const char *prog, unsigned cpus, unsigned scale)
{
	ssf_result first = {0};
	for (int b = 0; ssf_backend_names[b]; b++) {
		ssf_result r;
		char why[160] = "";
		int e = ssf_run(ssf_backend_find(ssf_backend_names[b]), prog, cpus, scale, &r, why,
				sizeof why);
		if (e)
			fprintf(stderr, "  %s: %s\n", ssf_backend_names[b], why);
		KT_EQ(e, 0);
		if (!r.ok)
			fprintf(stderr, "  %s: %s\n", ssf_backend_names[b], r.check);
		KT_CHECK(r.ok);
		KT_CHECK(r.cycles > 0 && r.instructions > 0 && r.bus_txns > 0);
		/* every agent (CPU, cache, bus) is switched once per cycle */
		KT_EQ(r.switches, r.cycles * (2 * cpus + 1));
		if (b == 0) {
			first = r;
			continue;
		}
		KT_EQ(r.cycles, first.cycles);
		KT_EQ(r.switches, first.switches);
		KT_EQ(r.instructions, first.instructions);
		KT_EQ(r.bus_txns, first.bus_txns);
		KT_EQ(r.digest, first.digest);
	}
}

static void sum_is_right_and_identical_on_every_backend(void)
{
	run_everywhere("sum", 4, 2);
}

static void sum_on_one_cpu_is_right_and_identical_on_every_backend(void)
{
	run_everywhere("sum", 1, 1);
}

static void barrier_holds_and_runs_identically_on_every_backend(void)
{
	run_everywhere("barrier", 4, 1);
}

static void prodcons_consumes_each_item_once_identically_on_every_backend(void)
{
	run_everywhere("prodcons", 4, 1);
}

static void prodcons_with_more_consumers_than_producers_is_right_everywhere(void)
{
	run_everywhere("prodcons", 3, 1);
}

/* More CPUs make more cycles: the bus and the lock are shared. */
static void more_cpus_take_more_cycles_for_the_same_work_per_cpu(void)
{
	ssf_result r2, r8;
	char why[160];
	KT_EQ(ssf_run(&ssf_backend_karui, "barrier", 2, 1, &r2, why, sizeof why), 0);
	KT_EQ(ssf_run(&ssf_backend_karui, "barrier", 8, 1, &r8, why, sizeof why), 0);
	KT_CHECK(r2.ok && r8.ok);
	KT_CHECK(r8.cycles > r2.cycles);
}

static void run_rejects_bad_programs_cpus_and_scales(void)
{
	ssf_result r;
	char why[160];
	const ssf_backend *k = &ssf_backend_karui;
	KT_EQ(ssf_run(k, "nosuch", 4, 1, &r, why, sizeof why), EINVAL);
	KT_CHECK(strstr(why, "unknown program"));
	KT_EQ(ssf_run(k, NULL, 4, 1, &r, why, sizeof why), EINVAL);
	KT_EQ(ssf_run(k, "sum", 0, 1, &r, why, sizeof why), EINVAL);
	KT_EQ(ssf_run(k, "sum", SSF_CPUS_MAX + 1, 1, &r, why, sizeof why), EINVAL);
	KT_EQ(ssf_run(k, "prodcons", 1, 1, &r, why, sizeof why), EINVAL);
	KT_CHECK(strstr(why, "prodcons runs on 2 to"));
	KT_EQ(ssf_run(k, "sum", 4, 0, &r, why, sizeof why), EINVAL);
	KT_EQ(ssf_run(k, "sum", 4, SSF_SCALE_MAX + 1, &r, why, sizeof why), EINVAL);
	KT_EQ(ssf_run(NULL, "sum", 4, 1, &r, why, sizeof why), EINVAL);
	KT_CHECK(ssf_backend_find("lwp") == NULL);
}

static void karui_backend_refuses_to_start_inside_running_karui(void)
{
	kr_config c = {.vps = 1};
	ssf_result r;
	char why[160] = "";
	KT_EQ(kr_init(&c), 0);
	KT_EQ(ssf_run(&ssf_backend_karui, "sum", 2, 1, &r, why, sizeof why), EBUSY);
	KT_CHECK(strstr(why, "kr_init"));
	KT_EQ(kr_fini(), 0);
}

static void assembler_encodes_operands_labels_and_constants(void)
{
	ssf_insn *code;
	unsigned n;
	char why[160];
	KT_EQ(ssf_assemble(".equ X, 12\n"
			   "top:  ld r3, X(r4)   ; a comment\n"
			   "      beq r1, r2, end\n"
			   "      addi r5, r0, -7\n"
			   "end:  jmp top\n",
			   &code, &n, why, sizeof why), 0);
	KT_EQ(n, 4);
	KT_EQ(code[0].op, SSF_LD);
	KT_EQ(code[0].rd, 3);
	KT_EQ(code[0].ra, 4);
	KT_EQ(code[0].imm, 12);
	KT_EQ(code[1].op, SSF_BEQ);
	KT_EQ(code[1].ra, 1);
	KT_EQ(code[1].rb, 2);
	KT_EQ(code[1].imm, 3);
	KT_EQ(code[2].imm, -7);
	KT_EQ(code[3].op, SSF_JMP);
	KT_EQ(code[3].imm, 0);
	free(code);
}

static void assembler_rejects_bad_text_naming_the_line(void)
{
	static const struct {
		const char *text, *says;
	} bad[] = {
		{"halt\nfoo r1\n", "line 2: unknown instruction"},
		{"li r16, 1\n", "no register"},
		{"add r1, r2\n", "takes 3 operands"},
		{"jmp nowhere\n", "not defined"},
		{"ld r1, 4[r2]\n", "imm(reg)"},
		{"x: halt\nx: halt\n", "defined twice"},
		{"li r1, 12z\n", "no number"},
		{".equ A, 70000\nli r1, B\n", "line 2"},
		{"; nothing\n", "no instructions"},
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		ssf_insn *code = NULL;
		unsigned n;
		char why[160] = "";
		KT_EQ(ssf_assemble(bad[i].text, &code, &n, why, sizeof why), EINVAL);
		if (!strstr(why, bad[i].says))
			fprintf(stderr, "  '%s' said '%s'\n", bad[i].text, why);
		KT_CHECK(strstr(why, bad[i].says));
		KT_CHECK(code == NULL);
	}
}

int main(int argc, char **argv)
{
	kt_args(argc, argv);
	KT_RUN(sum_is_right_and_identical_on_every_backend);
	KT_RUN(sum_on_one_cpu_is_right_and_identical_on_every_backend);
	KT_RUN(barrier_holds_and_runs_identically_on_every_backend);
	KT_RUN(prodcons_consumes_each_item_once_identically_on_every_backend);
	KT_RUN(prodcons_with_more_consumers_than_producers_is_right_everywhere);
	KT_RUN(more_cpus_take_more_cycles_for_the_same_work_per_cpu);
	KT_RUN(run_rejects_bad_programs_cpus_and_scales);
	KT_RUN(karui_backend_refuses_to_start_inside_running_karui);
	KT_RUN(assembler_encodes_operands_labels_and_constants);
	KT_RUN(assembler_rejects_bad_text_naming_the_line);
	return kt_finish();
}
