/* CPython's object arenas in one huge-page-aligned region: see arenas.c. */
#pragma once

/* Before Python is initialised. */
void arenas_install(void);
/* After the zygote's imports: give back the region's unused tail. */
void arenas_seal(void);
