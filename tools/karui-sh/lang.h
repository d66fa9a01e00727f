/*
 * karui-sh's language: the tokens, the syntax tree and the calls that make
 * them (lex.c, parse.c), and the arena they live in (mem.c).
 *
 * One parse reads one complete command: the and-or lists up to the end
 * of a line, with the lines that a trailing `|`, `&&`, `||`, an open
 * quote or a backslash-newline pull in.  A word keeps its text as
 * written, quotes, backslashes and `$` included: what it means (its
 * fields after expansion) depends on the variables when it runs, so
 * expansion (expand.c) reads the quotes, not the parser.
 */
#ifndef KSH_LANG_H
#define KSH_LANG_H

#include <stdbool.h>
#include <stddef.h>

/* ---- memory (mem.c) ---- */

/* Every node and string of one parse comes from one arena and goes with
 * it.  Allocation failure ends the shell with a message (status 2), in
 * the arena as in ksh_xmalloc: a shell that cannot hold its own input
 * has nothing better to do. */
struct ksh_chunk;
struct ksh_arena {
	struct ksh_chunk *head;
};
void *ksh_alloc(struct ksh_arena *a, size_t n); /* zeroed */
char *ksh_strndup(struct ksh_arena *a, const char *s, size_t n);
/* Append one zeroed element to an array in a, doubling it when full. */
void *ksh_push(struct ksh_arena *a, void *arr, size_t *n, size_t *cap, size_t elsize);
void ksh_arena_free(struct ksh_arena *a);

void *ksh_xmalloc(size_t n);
void *ksh_xrealloc(void *p, size_t n);
char *ksh_xstrdup(const char *s);

/* ---- tokens (lex.c) ---- */

enum ksh_tok {
	TK_EOF, TK_NEWLINE, TK_WORD, TK_IONUM,
	TK_PIPE, TK_AND_IF, TK_OR_IF, TK_SEMI, TK_DSEMI, TK_AMP, TK_LPAREN, TK_RPAREN,
	TK_LESS, TK_GREAT, TK_DGREAT, TK_LESSAND, TK_GREATAND, TK_LESSGREAT, TK_CLOBBER,
	TK_DLESS, TK_DLESSDASH,
};

struct ksh_token {
	enum ksh_tok kind;
	const char *text; /* into the lexer's input */
	size_t len;
	int line;
};

/* What a lexing or parsing step ended with. */
enum ksh_status {
	KSH_OK,
	KSH_MORE,   /* the input ends inside a construct: more lines may finish it */
	KSH_SYNTAX, /* a syntax error: ksh_syntax says which */
};

/* A syntax error as bash words it: "syntax error near unexpected token
 * `)'", with the line it is on; show_line: bash also quotes that line. */
struct ksh_syntax {
	int line;
	bool show_line;
	char msg[200];
};

struct ksh_lexer {
	const char *s;
	size_t len, pos;
	int line;
	bool final; /* no input comes after s: an open construct is an error */
	struct ksh_syntax *err;
};

void ksh_lex_init(struct ksh_lexer *lx, const char *s, size_t len, int first_line, bool final,
		  struct ksh_syntax *err);
enum ksh_status ksh_lex(struct ksh_lexer *lx, struct ksh_token *t);

/* ---- the syntax tree (parse.c) ---- */

enum ksh_redir_op {
	KSH_R_IN,      /* <   */
	KSH_R_OUT,     /* >   */
	KSH_R_APPEND,  /* >>  */
	KSH_R_CLOBBER, /* >|  */
	KSH_R_RDWR,    /* <>  */
	KSH_R_DUPIN,   /* <&  */
	KSH_R_DUPOUT,  /* >&  */
};

struct ksh_redir {
	int fd;             /* the IO number written, or the operator's default */
	enum ksh_redir_op op;
	const char *word;   /* as written */
};

/* A simple command: assignments, then words; redirections anywhere. */
struct ksh_cmd {
	char **assign;      /* "NAME=value" as written */
	size_t nassign, capassign;
	char **word;
	size_t nword, capword;
	struct ksh_redir *redir; /* in the order written */
	size_t nredir, capredir;
	int line;
};

struct ksh_pipeline {
	bool bang;          /* `!`: the status is negated */
	struct ksh_cmd *cmd;
	size_t ncmd, capcmd;
};

enum ksh_andor_op { KSH_AO_FIRST, KSH_AO_AND, KSH_AO_OR };

/* Pipelines joined by && and ||: each item's op joins it to the one
 * before (KSH_AO_FIRST for the first). */
struct ksh_andor_item {
	enum ksh_andor_op op;
	struct ksh_pipeline pl;
};
struct ksh_andor {
	struct ksh_andor_item *item;
	size_t n, cap;
};

/* What one parse yields: and-or lists separated by `;`, run in order. */
struct ksh_list {
	struct ksh_andor *ao;
	size_t nao, capao;
};

/* Parse one complete command from s (whole lines, the first numbered
 * first_line).  KSH_OK: *out is the list (maybe empty: a blank line, a
 * comment); KSH_MORE: s ends inside the command and !final: call again
 * with the next line appended; KSH_SYNTAX: *err says what and where. */
enum ksh_status ksh_parse(const char *s, size_t len, int first_line, bool final,
			  struct ksh_arena *a, struct ksh_list **out, struct ksh_syntax *err);

/* NAME=... with a valid NAME: the length of NAME, else 0. */
size_t ksh_assignment_name(const char *word);
/* [A-Za-z_][A-Za-z0-9_]* of exactly len characters */
bool ksh_valid_name(const char *s, size_t len);

#endif
