/* run_outcome lifetime (see outcome.h). */
#include "ipc/outcome.h"

void run_outcome_free(struct run_outcome *o)
{
        strbuf_free(&o->out);
        strbuf_free(&o->err);
}
