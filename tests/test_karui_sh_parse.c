/*
 * karui-sh's lexer and parser (tools/karui-sh/lang.h): the tree a line
 * makes (compound commands, here-documents, where substitutions end), when
 * a line needs the next one, and bash's words for a line that is wrong.  That a bad line ends `karui-sh -c` with status 2 and bash's
 * two-line message is checked against bash itself (tests/karui-sh/).
 */
#include "kt.h"
#include "lang.h"

static struct ksh_arena arena;
static struct ksh_syntax err;

static enum ksh_status parse_as(const char *s, bool final, struct ksh_list **l)
{
	memset(&err, 0, sizeof err);
	return ksh_parse(s, strlen(s), 1, final, &arena, l, &err);
}

static struct ksh_list *parse_ok(const char *s)
{
	struct ksh_list *l = NULL;
	enum ksh_status st = parse_as(s, true, &l);
	if (st != KSH_OK)
		fprintf(stderr, "  %s: status %d: %s\n", s, st, err.msg);
	KT_EQ(st, KSH_OK);
	return l;
}

/* The error a final line gives: its message, which must be msg. */
static void parse_fails(const char *s, const char *msg, int line, bool show_line)
{
	struct ksh_list *l;
	KT_EQ(parse_as(s, true, &l), KSH_SYNTAX);
	if (strcmp(err.msg, msg) != 0)
		fprintf(stderr, "  %s: said \"%s\", expected \"%s\"\n", s, err.msg, msg);
	KT_CHECK(strcmp(err.msg, msg) == 0);
	KT_EQ(err.line, line);
	KT_EQ(err.show_line, show_line);
	KT_CHECK(l == NULL);
}

static void pipeline_of_three_commands_has_three_stages_in_order(void)
{
	struct ksh_list *l = parse_ok("cat words | grep zo | wc -l\n");
	KT_EQ(l->nao, 1);
	KT_EQ(l->ao[0].n, 1);
	struct ksh_pipeline *p = &l->ao[0].item[0].pl;
	KT_EQ(p->ncmd, 3);
	KT_CHECK(!p->bang);
	KT_CHECK(strcmp(p->cmd[0].word[0], "cat") == 0 && strcmp(p->cmd[0].word[1], "words") == 0);
	KT_CHECK(strcmp(p->cmd[1].word[1], "zo") == 0);
	KT_EQ(p->cmd[2].nword, 2);
	KT_CHECK(strcmp(p->cmd[2].word[1], "-l") == 0);
}

static void and_or_joins_pipelines_and_semicolons_separate_lists(void)
{
	struct ksh_list *l = parse_ok("false && echo x || echo y; ! true | false;");
	KT_EQ(l->nao, 2);
	KT_EQ(l->ao[0].n, 3);
	KT_EQ(l->ao[0].item[0].op, KSH_AO_FIRST);
	KT_EQ(l->ao[0].item[1].op, KSH_AO_AND);
	KT_EQ(l->ao[0].item[2].op, KSH_AO_OR);
	KT_CHECK(l->ao[1].item[0].pl.bang);
	KT_EQ(l->ao[1].item[0].pl.ncmd, 2);
}

static void assignments_come_only_before_the_command_name(void)
{
	struct ksh_list *l = parse_ok("A=1 B=\"x y\" env C=3 1D=4");
	struct ksh_cmd *c = &l->ao[0].item[0].pl.cmd[0];
	KT_EQ(c->nassign, 2);
	KT_CHECK(strcmp(c->assign[1], "B=\"x y\"") == 0);
	KT_EQ(c->nword, 3);
	KT_CHECK(strcmp(c->word[1], "C=3") == 0 && strcmp(c->word[2], "1D=4") == 0);
	l = parse_ok("X=1");
	c = &l->ao[0].item[0].pl.cmd[0];
	KT_EQ(c->nassign, 1);
	KT_EQ(c->nword, 0);
	KT_CHECK(ksh_assignment_name("_a9=") == 3 && ksh_assignment_name("9a=") == 0 &&
		 ksh_assignment_name("'a'=1") == 0 && ksh_assignment_name("a") == 0);
}

static void redirections_keep_their_order_fds_and_words(void)
{
	struct ksh_list *l = parse_ok("cmd <in >out 2>&1 3>>log 4<>rw >|clob <&- 5>&2 arg");
	struct ksh_cmd *c = &l->ao[0].item[0].pl.cmd[0];
	KT_EQ(c->nword, 2);
	KT_EQ(c->nredir, 8);
	static const struct { int fd; enum ksh_redir_op op; const char *w; } want[] = {
		{0, KSH_R_IN, "in"},       {1, KSH_R_OUT, "out"},        {2, KSH_R_DUPOUT, "1"},
		{3, KSH_R_APPEND, "log"},  {4, KSH_R_RDWR, "rw"},        {1, KSH_R_CLOBBER, "clob"},
		{0, KSH_R_DUPIN, "-"},     {5, KSH_R_DUPOUT, "2"},
	};
	for (int i = 0; i < 8; i++) {
		KT_EQ(c->redir[i].fd, want[i].fd);
		KT_EQ(c->redir[i].op, want[i].op);
		KT_CHECK(strcmp(c->redir[i].word, want[i].w) == 0);
	}
}

static void io_number_binds_only_when_it_touches_the_operator(void)
{
	struct ksh_list *l = parse_ok("echo 2>f 2 >g a2>h");
	struct ksh_cmd *c = &l->ao[0].item[0].pl.cmd[0];
	KT_EQ(c->nword, 3); /* echo, 2, a2 */
	KT_CHECK(strcmp(c->word[1], "2") == 0 && strcmp(c->word[2], "a2") == 0);
	KT_EQ(c->nredir, 3);
	KT_EQ(c->redir[0].fd, 2);
	KT_EQ(c->redir[1].fd, 1);
	KT_EQ(c->redir[2].fd, 1);
}

static void words_keep_quotes_and_dollars_for_expansion(void)
{
	struct ksh_list *l = parse_ok("echo 'a b'\"c $d\"\\ e ${f}g a#b #comment");
	struct ksh_cmd *c = &l->ao[0].item[0].pl.cmd[0];
	KT_EQ(c->nword, 4);
	KT_CHECK(strcmp(c->word[1], "'a b'\"c $d\"\\ e") == 0);
	KT_CHECK(strcmp(c->word[2], "${f}g") == 0);
	KT_CHECK(strcmp(c->word[3], "a#b") == 0);
	KT_CHECK(strcmp(parse_ok("echo \"a;b|c\" 'x&&y'")->ao[0].item[0].pl.cmd[0].word[1],
			"\"a;b|c\"") == 0);
}

static void blank_and_comment_lines_parse_to_nothing(void)
{
	KT_EQ(parse_ok("\n")->nao, 0);
	KT_EQ(parse_ok("   # only a comment\n")->nao, 0);
	KT_EQ(parse_ok("")->nao, 0);
}

static void open_constructs_ask_for_the_next_line(void)
{
	static const char *const open[] = {"echo a |\n", "echo a &&\n", "echo a ||\n",
					   "echo \"a\n", "echo 'a\n", "echo a\\\n",
					   "echo ${a\n", "echo a |\n\n"};
	struct ksh_list *l;
	for (size_t i = 0; i < sizeof open / sizeof open[0]; i++)
		KT_EQ(parse_as(open[i], false, &l), KSH_MORE);
	struct ksh_list *done = parse_ok("echo a |\n  wc -l\n");
	KT_EQ(done->ao[0].item[0].pl.ncmd, 2);
	done = parse_ok("echo \"a\nb\" c\n");
	KT_CHECK(strcmp(done->ao[0].item[0].pl.cmd[0].word[1], "\"a\nb\"") == 0);
	done = parse_ok("echo a\\\nb\n"); /* joined inside the word */
	KT_EQ(done->ao[0].item[0].pl.cmd[0].nword, 2);
	done = parse_ok("echo a \\\n b\n"); /* and between words */
	KT_EQ(done->ao[0].item[0].pl.cmd[0].nword, 3);
}

static void unexpected_tokens_are_named_as_bash_names_them(void)
{
	parse_fails("echo )", "syntax error near unexpected token `)'", 1, true);
	parse_fails("echo a;;", "syntax error near unexpected token `;;'", 1, true);
	parse_fails("| cat", "syntax error near unexpected token `|'", 1, true);
	parse_fails("echo a | | cat", "syntax error near unexpected token `|'", 1, true);
	parse_fails("echo a; ; b", "syntax error near unexpected token `;'", 1, true);
	parse_fails("echo >\n", "syntax error near unexpected token `newline'", 1, true);
	parse_fails("echo 2>&", "syntax error near unexpected token `newline'", 1, true);
	parse_fails("echo > |", "syntax error near unexpected token `|'", 1, true);
	parse_fails("fi", "syntax error near unexpected token `fi'", 1, true);
	parse_fails("true |\necho )\n", "syntax error near unexpected token `)'", 2, true);
}

static void end_of_input_inside_a_command_is_reported_where_bash_does(void)
{
	parse_fails("echo a |", "syntax error: unexpected end of file", 2, false);
	parse_fails("echo a &&\n", "syntax error: unexpected end of file", 2, false);
	parse_fails("echo a ||\n\n", "syntax error: unexpected end of file", 3, false);
	parse_fails("echo \"a\nb", "unexpected EOF while looking for matching `\"'", 1, false);
	parse_fails("x |\necho 'a", "unexpected EOF while looking for matching `''", 2, false);
	parse_fails("echo ${a", "unexpected EOF while looking for matching `}'", 1, false);
	/* a backslash that ends the input stands for itself */
	KT_CHECK(strcmp(parse_ok("echo a\\")->ao[0].item[0].pl.cmd[0].word[1], "a\\") == 0);
}

static struct ksh_cmd *first_cmd(struct ksh_list *l)
{
	return &l->ao[0].item[0].pl.cmd[0];
}

static void compound_commands_make_their_trees(void)
{
	struct ksh_cmd *c = first_cmd(parse_ok("if a; then b; elif c\nthen d; else e; fi >out"));
	KT_EQ(c->kind, KSH_C_IF);
	KT_EQ(c->nclause, 2);
	KT_CHECK(c->else_part != NULL);
	KT_EQ(c->nredir, 1);
	KT_CHECK(strcmp(c->clause[1].cond->ao[0].item[0].pl.cmd[0].word[0], "c") == 0);
	c = first_cmd(parse_ok("while a; do b; done"));
	KT_EQ(c->kind, KSH_C_WHILE);
	KT_CHECK(c->cond && c->body);
	KT_EQ(first_cmd(parse_ok("until a\ndo b\ndone"))->kind, KSH_C_UNTIL);
	c = first_cmd(parse_ok("for i in a b c; do echo $i; done"));
	KT_EQ(c->kind, KSH_C_FOR);
	KT_CHECK(c->has_in && c->nword == 3 && strcmp(c->name, "i") == 0);
	c = first_cmd(parse_ok("for i\ndo :; done"));
	KT_CHECK(!c->has_in && c->nword == 0);
	c = first_cmd(parse_ok("case $x in (a|b) one;; c) ;; *) two\nesac"));
	KT_EQ(c->kind, KSH_C_CASE);
	KT_EQ(c->nitem, 3);
	KT_EQ(c->item[0].npat, 2);
	KT_CHECK(c->item[1].body == NULL || c->item[1].body->nao == 0);
	c = first_cmd(parse_ok("f() { echo in f; } 2>&1"));
	KT_EQ(c->kind, KSH_C_FUNCDEF);
	KT_CHECK(strcmp(c->name, "f") == 0 && c->func->kind == KSH_C_GROUP);
	KT_EQ(c->func->nredir, 1);
	struct ksh_list *l = parse_ok("(a; b) | { c; } & d");
	KT_EQ(l->nao, 2);
	KT_CHECK(l->ao[0].background && !l->ao[1].background);
	KT_EQ(l->ao[0].item[0].pl.cmd[0].kind, KSH_C_SUBSHELL);
	KT_EQ(l->ao[0].item[0].pl.cmd[1].kind, KSH_C_GROUP);
	/* reserved words are words where no command starts */
	KT_EQ(first_cmd(parse_ok("echo if then fi done"))->nword, 5);
}

static void open_compound_commands_ask_for_more(void)
{
	static const char *const open[] = {"if true; then\n", "while :\n", "for i in a\n",
					   "case x in\n", "{ echo\n", "(\n", "f()\n",
					   "echo $(echo\n", "cat <<E\nbody\n", "echo $((1 +\n"};
	struct ksh_list *l;
	for (size_t i = 0; i < sizeof open / sizeof open[0]; i++)
		KT_EQ(parse_as(open[i], false, &l), KSH_MORE);
}

static void here_documents_take_the_lines_after_theirs(void)
{
	struct ksh_list *l = parse_ok("cat <<A; cat <<-'B'\none $x\nA\n\ttwo\n\tB\n");
	struct ksh_redir *a = &l->ao[0].item[0].pl.cmd[0].redir[0];
	struct ksh_redir *b = &l->ao[1].item[0].pl.cmd[0].redir[0];
	KT_EQ(a->op, KSH_R_HEREDOC);
	KT_CHECK(strcmp(a->doc->body, "one $x\n") == 0 && !a->doc->quoted);
	KT_CHECK(strcmp(b->doc->body, "two\n") == 0 && b->doc->quoted);
	/* at the end of the input the text ends, as in dash */
	l = parse_ok("cat <<E\nunended\n");
	KT_CHECK(strcmp(first_cmd(l)->redir[0].doc->body, "unended\n") == 0);
}

static void substitutions_end_where_their_commands_do(void)
{
	struct ksh_cmd *c = first_cmd(parse_ok("echo $(case x in x) echo ')';; esac) `a` $((1+(2)))"));
	KT_EQ(c->nword, 4);
	KT_CHECK(strcmp(c->word[1], "$(case x in x) echo ')';; esac)") == 0);
	KT_CHECK(strcmp(c->word[3], "$((1+(2)))") == 0);
	c = first_cmd(parse_ok("echo ${x:-\"}\"} ${y#\"$(echo })\"}"));
	KT_EQ(c->nword, 3);
}

static void unclosed_constructs_are_syntax_errors(void)
{
	parse_fails("if true; then echo a", "syntax error: unexpected end of file", 2, false);
	parse_fails("while :; do :; ", "syntax error: unexpected end of file", 2, false);
	parse_fails("echo $(echo a", "unexpected EOF while looking for matching `)'", 2, false);
	parse_fails("echo `echo a", "unexpected EOF while looking for matching ``'", 1, false);
	parse_fails("if then fi", "syntax error near unexpected token `then'", 1, true);
	parse_fails("{ }", "syntax error near unexpected token `}'", 1, true);
	parse_fails("for 1 in a; do :; done", "syntax error near unexpected token `1'", 1, true);
	parse_fails("f() echo", "syntax error near unexpected token `echo'", 1, true);
	parse_fails("echo a; fi", "syntax error near unexpected token `fi'", 1, true);
}

static void nesting_is_bounded(void)
{
	size_t n = 3 * KSH_MAX_DEPTH;
	char *s = malloc(2 * n + 8);
	memset(s, '(', n);
	strcpy(s + n, "a");
	memset(s + n + 1, ')', n);
	s[2 * n + 1] = 0;
	struct ksh_list *l;
	KT_EQ(parse_as(s, true, &l), KSH_SYNTAX);
	for (size_t i = 0; i < n; i++)
		memcpy(s + 2 * i, "$(", 2);
	KT_EQ(parse_as(s, true, &l), KSH_SYNTAX);
	free(s);
}

static void bashisms_are_refused_by_name(void)
{
	parse_fails("[[ a ]]", "`[[' is not supported (not POSIX sh)", 1, true);
	parse_fails("function f { :; }", "`function' is not supported (not POSIX sh)", 1, true);
}

/* A NUL byte is part of a word (the shell's input drops them, but the
 * parser takes any bytes): the lexer moves on, the line parses. */
static void a_nul_byte_is_part_of_a_word(void)
{
	const char s[] = "echo a\0b | cat\n";
	struct ksh_list *l = NULL;
	KT_EQ(ksh_parse(s, sizeof s - 1, 1, true, &arena, &l, &err), KSH_OK);
	struct ksh_pipeline *p = &l->ao[0].item[0].pl;
	KT_EQ(p->ncmd, 2);
	KT_EQ(p->cmd[0].nword, 2);
	KT_CHECK(memcmp(p->cmd[0].word[1], "a\0b", 4) == 0);
}

int main(int argc, char **argv)
{
	kt_args(argc, argv);
	KT_RUN(pipeline_of_three_commands_has_three_stages_in_order);
	KT_RUN(and_or_joins_pipelines_and_semicolons_separate_lists);
	KT_RUN(assignments_come_only_before_the_command_name);
	KT_RUN(redirections_keep_their_order_fds_and_words);
	KT_RUN(io_number_binds_only_when_it_touches_the_operator);
	KT_RUN(words_keep_quotes_and_dollars_for_expansion);
	KT_RUN(blank_and_comment_lines_parse_to_nothing);
	KT_RUN(open_constructs_ask_for_the_next_line);
	KT_RUN(unexpected_tokens_are_named_as_bash_names_them);
	KT_RUN(end_of_input_inside_a_command_is_reported_where_bash_does);
	KT_RUN(compound_commands_make_their_trees);
	KT_RUN(open_compound_commands_ask_for_more);
	KT_RUN(here_documents_take_the_lines_after_theirs);
	KT_RUN(substitutions_end_where_their_commands_do);
	KT_RUN(unclosed_constructs_are_syntax_errors);
	KT_RUN(nesting_is_bounded);
	KT_RUN(bashisms_are_refused_by_name);
	KT_RUN(a_nul_byte_is_part_of_a_word);
	ksh_arena_free(&arena);
	return kt_finish();
}
