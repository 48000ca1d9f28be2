/* The runner every Check suite of tests/ ends with: runs the suite (each
 * test in a child process, Check's default) and returns how many failed. */
#ifndef CDP_TESTS_CHECK_RUN_H
#define CDP_TESTS_CHECK_RUN_H

#include <check.h>

static inline int check_run(Suite *s)
{
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed;
}

#endif
