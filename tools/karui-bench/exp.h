/* karui-bench: karui's experiment functions beside the peers' (peers.h). */
#ifndef KARUI_BENCH_EXP_H
#define KARUI_BENCH_EXP_H
#include <string.h>
#include "peers.h"

int kb_karui_yield(const kb_args *a, kb_res *r);
int kb_karui_switch(const kb_args *a, kb_res *r);
int kb_karui_create_join(const kb_args *a, kb_res *r);
int kb_karui_create_batch(const kb_args *a, kb_res *r);
int kb_karui_many(const kb_args *a, kb_res *r);
int kb_karui_mutex(const kb_args *a, kb_res *r);
int kb_karui_monitor(const kb_args *a, kb_res *r);
int kb_karui_condvar_pingpong(const kb_args *a, kb_res *r);
int kb_karui_sem_pingpong(const kb_args *a, kb_res *r);
int kb_karui_chan_pingpong(const kb_args *a, kb_res *r);
int kb_karui_rendezvous(const kb_args *a, kb_res *r);
int kb_karui_stream(const kb_args *a, kb_res *r);
#endif
