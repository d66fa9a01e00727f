/*
 * karui-bench-null — seed 003's null program (§6.1, Table 2): main does
 * nothing.  seed003.table2 (exp_uproc.c) starts it as a μprocess, as a
 * process and beside a thread; what is timed is everything around main.
 * A plain PIE linked with the C library, like karui-bench-uprog.
 */
int main(void)
{
	return 0;
}
