/*
 * karui domains — the sizes domain.c and port.c share.
 */
#ifndef KARUI_DOMAIN_EPC_H
#define KARUI_DOMAIN_EPC_H

enum {
	KR__EPC_PROCS = 64, /* procedures a domain exports */
	KR__EPC_SLOTS = 64, /* callee stacks of a domain: its calls at once */
	KR__EPC_ACL = 16,   /* domains named on a section's access list */
};

#endif
