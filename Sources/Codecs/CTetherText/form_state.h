// The form the kernels run in, read where they are called: a relaxed load of the state that
// cpu.c keeps (and decides at the first call), instead of a call into cpu.c on every check (about
// 1 % of the MessagePack decode row, whose strings are each checked as UTF-8). Not a public header.

#ifndef TETHER_FORM_STATE_H
#define TETHER_FORM_STATE_H

#include "tether_text.h"

#if defined(__x86_64__)
/// -1 until decided (`tether_vector_form`); then the form in use.
extern int tether_form_state;

static inline int current_form(void) {
    int state = __atomic_load_n(&tether_form_state, __ATOMIC_RELAXED);
    return state >= 0 ? state : tether_vector_form();
}
#else
static inline int current_form(void) { return tether_form_portable; }
#endif

#endif
