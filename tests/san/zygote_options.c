/* Linked into lockbox-pyzygote only in sanitizer builds (make SAN=...).
 * The zygote's children run the user's Python program in the zygote's own
 * process image, with the signal handlers it has; ASan's handlers for the
 * signals a program dies of would turn `ctypes.string_at(0)` into an ASan
 * report and exit code 1 instead of a death by SIGSEGV. So ASan leaves
 * those signals alone here. ASan's quarantine of freed blocks counts against
 * the run's memory limit, so it is kept small (16 MiB, not 256). Every
 * other check (instrumented loads and stores, use after free, the other
 * interceptors) stays on.
 * Options come from this function, not ASAN_OPTIONS: lockboxd and the
 * jailer give their children a clean environment. */
const char *__asan_default_options(void);

const char *__asan_default_options(void)
{
        return "handle_segv=0:handle_sigbus=0:handle_sigfpe=0:handle_sigill=0:"
               "quarantine_size_mb=16";
}
