/*
 * karui-sh's language: the tokens, the syntax tree and the calls that make
 * them (lex.c, parse.c), and the arena they live in (mem.c).
 *
 * One parse reads one complete command: the and-or lists up to the end
 * of a line, with the lines that a trailing `|`, `&&`, `||`, an open
 * quote, a backslash-newline, an open compound command or the bodies of
 * its here-documents pull in.  A word keeps its text as
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
	int refs; /* a heap arena (ksh_arena_new): its holders */
};
/* A heap arena with one reference; the tree of a command that a function
 * or a background job keeps outlives the command line: each takes a
 * reference (atomic: jobs end on other threads). */
struct ksh_arena *ksh_arena_new(void);
void ksh_arena_ref(struct ksh_arena *a);
void ksh_arena_unref(struct ksh_arena *a);
void *ksh_alloc(struct ksh_arena *a, size_t n); /* zeroed */
char *ksh_strndup(struct ksh_arena *a, const char *s, size_t n);
/* Append one zeroed element to an array in a, doubling it when full. */
void *ksh_push(struct ksh_arena *a, void *arr, size_t *n, size_t *cap, size_t elsize);
void ksh_arena_free(struct ksh_arena *a);

void *ksh_xmalloc(size_t n);
void *ksh_xrealloc(void *p, size_t n);
char *ksh_xstrdup(const char *s);
char *ksh_strndup_x(const char *s, size_t n); /* malloc'd, NUL-terminated */

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
	int depth;  /* of $(...) nested in the word being read */
	bool arith; /* the last $( skipped was $((...)) */
};

/* How deep constructs may nest (compound commands, $(...)) before the
 * parser refuses the command: its recursion is bounded by this. */
#define KSH_MAX_DEPTH 500

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
	KSH_R_HEREDOC, /* << and <<- */
};

/* A here-document: its text is read after the line that holds it. */
struct ksh_heredoc {
	char *delim;        /* the delimiter, quotes removed */
	bool strip_tabs;    /* <<- */
	bool quoted;        /* the delimiter had quotes: the text is not expanded */
	char *body;         /* its lines (leading tabs stripped for <<-) */
};

struct ksh_redir {
	int fd;             /* the IO number written, or the operator's default */
	enum ksh_redir_op op;
	const char *word;   /* as written (a here-document's delimiter) */
	struct ksh_heredoc *doc; /* KSH_R_HEREDOC */
};

struct ksh_list;

enum ksh_cmd_kind {
	KSH_C_SIMPLE,
	KSH_C_GROUP,    /* { list; } */
	KSH_C_SUBSHELL, /* ( list ) */
	KSH_C_IF,
	KSH_C_WHILE,
	KSH_C_UNTIL,
	KSH_C_FOR,
	KSH_C_CASE,
	KSH_C_FUNCDEF,  /* name() compound */
};

/* if COND then BODY, elif COND then BODY ... */
struct ksh_if_clause {
	struct ksh_list *cond, *body;
};

/* PATTERN | PATTERN ) BODY ;; -- body NULL: nothing */
struct ksh_case_item {
	char **pat;
	size_t npat, cappat;
	struct ksh_list *body;
};

/* A command: simple (assignments, then words; redirections anywhere) or
 * compound (its redirections after it). */
struct ksh_cmd {
	enum ksh_cmd_kind kind;
	int line;
	char **assign;      /* "NAME=value" as written */
	size_t nassign, capassign;
	char **word;        /* a simple command's; for's list; case's word is word[0] */
	size_t nword, capword;
	struct ksh_redir *redir; /* in the order written */
	size_t nredir, capredir;
	struct ksh_list *body;   /* group, subshell, loops */
	struct ksh_list *cond;   /* while, until */
	struct ksh_if_clause *clause; /* if and its elifs */
	size_t nclause, capclause;
	struct ksh_list *else_part;   /* if: NULL when none */
	const char *name;        /* for's variable, a function's name */
	bool has_in;             /* for NAME in ...: else "$@" */
	struct ksh_case_item *item;
	size_t nitem, capitem;
	struct ksh_cmd *func;    /* a function's body */
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
	bool background;    /* ended by `&` */
};

/* And-or lists separated by `;`, `&` or newlines, run in order. */
struct ksh_list {
	struct ksh_andor *ao;
	size_t nao, capao;
};

/* Parse one complete command from s (whole lines, the first numbered
 * first_line).  KSH_OK: *out is the list (maybe empty: a blank line, a
 * comment); KSH_MORE: s ends inside the command and !final: call again
 * with the next line appended; KSH_SYNTAX: *err says what and where.
 * The here-documents of the command's lines are part of it. */
enum ksh_status ksh_parse(const char *s, size_t len, int first_line, bool final,
			  struct ksh_arena *a, struct ksh_list **out, struct ksh_syntax *err);

/* The lexer's call into the parser: at lx->pos, just after the `(` of a
 * `$(`, parse the command list to its `)` and move lx->pos past it. */
enum ksh_status ksh_parse_subst(struct ksh_lexer *lx, int depth);

/* Skip the expansion that starts at lx->pos (a `$` or a backquote):
 * ${...}, $(...), $((...)), `...`, or a `$` alone.  dq: inside "...". */
enum ksh_status ksh_lex_skip_expansion(struct ksh_lexer *lx, bool dq);

/* NAME=... with a valid NAME: the length of NAME, else 0. */
size_t ksh_assignment_name(const char *word);
/* [A-Za-z_][A-Za-z0-9_]* of exactly len characters */
bool ksh_valid_name(const char *s, size_t len);

#endif
