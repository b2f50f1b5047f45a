/* Unit tests for deps/deps_tree.c: root seals and removes a tree another
 * account wrote, through descriptors only. The account (nobody, 65534)
 * plants symlinks to a canary, also while a seal or a removal runs; the
 * canary never changes. Two accounts and a chown to root: the cases need
 * root, and skip themselves (saying so) without it. */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "base/clock.h"
#include "deps/deps_tree.h"
#include "test.h"

/* chown that must work (the case is root); a failure aborts the case */
static void own(const char *path, uid_t uid)
{
        if (lchown(path, uid, uid) < 0)
                abort();
}

#define INSTALLER 65534

struct scene {
        char root[64];   /* root's 0755: the layer directory */
        char canary[96]; /* root's 0600 file outside the tree */
        char cdir[96];   /* root's 0700 directory outside the tree */
        int rootfd;
};

static void scene_make(struct scene *s)
{
        snprintf(s->root, sizeof(s->root), "/tmp/lbtree-XXXXXX");
        if (!mkdtemp(s->root))
                abort();
        chmod(s->root, 0755);
        snprintf(s->canary, sizeof(s->canary), "%s.canary", s->root);
        snprintf(s->cdir, sizeof(s->cdir), "%s.cdir", s->root);
        int fd = open(s->canary, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (fd < 0 || write(fd, "secret", 6) != 6)
                abort();
        close(fd);
        mkdir(s->cdir, 0700);
        s->rootfd = open(s->root, O_RDONLY | O_DIRECTORY);
}

static void scene_free(struct scene *s)
{
        char cmd[512];
        if ((size_t)snprintf(cmd, sizeof(cmd), "rm -rf %s %s %s", s->root, s->canary, s->cdir) >=
                sizeof(cmd) ||
            system(cmd) != 0)
                fprintf(stderr, "cleanup failed\n");
        close(s->rootfd);
}

static bool canary_intact(const struct scene *s)
{
        struct stat a, b;
        return stat(s->canary, &a) == 0 && a.st_uid == 0 && (a.st_mode & 07777) == 0600 &&
               stat(s->cdir, &b) == 0 && b.st_uid == 0 && (b.st_mode & 07777) == 0700;
}

/* layer/ with sub/, a file in each, all the installer's. */
static void tree_make(const struct scene *s)
{
        char p[256];
        snprintf(p, sizeof(p), "%s/layer", s->root);
        mkdir(p, 0700);
        own(p, INSTALLER);
        snprintf(p, sizeof(p), "%s/layer/sub", s->root);
        mkdir(p, 0700);
        own(p, INSTALLER);
        const char *files[] = {"layer/file", "layer/sub/file"};
        for (size_t i = 0; i < 2; i++) {
                snprintf(p, sizeof(p), "%s/%s", s->root, files[i]);
                int fd = open(p, O_WRONLY | O_CREAT, 0600);
                close(fd);
                own(p, INSTALLER);
        }
}

static mode_t mode_of(const struct scene *s, const char *rel, uid_t *ret_uid)
{
        char p[256];
        struct stat st;
        snprintf(p, sizeof(p), "%s/%s", s->root, rel);
        if (lstat(p, &st) < 0)
                return 0;
        *ret_uid = st.st_uid;
        return st.st_mode & 07777;
}

TEST(deps_tree_seal_makes_it_roots_and_leaves_link_targets_alone)
{
        struct scene s;
        REQUIRE_ROOT("deps_tree_seal chowns to root what another account owns");
        scene_make(&s);
        tree_make(&s);
        char p[256], t[256];
        snprintf(p, sizeof(p), "%s/layer/link", s.root);
        EXPECT_INT_EQ(symlink(s.canary, p), 0);
        EXPECT_INT_EQ(lchown(p, INSTALLER, INSTALLER), 0);
        snprintf(t, sizeof(t), "%s/layer/sub/run.sh", s.root);
        int fd = open(t, O_WRONLY | O_CREAT, 0700);
        close(fd);
        own(t, INSTALLER);
        EXPECT_INT_EQ(deps_tree_seal(s.rootfd, "layer", INSTALLER), 0);
        uid_t uid = 1;
        EXPECT_INT_EQ(mode_of(&s, "layer", &uid), 0755);
        EXPECT_INT_EQ(uid, 0);
        EXPECT_INT_EQ(mode_of(&s, "layer/sub/file", &uid), 0644);
        EXPECT_INT_EQ(uid, 0);
        EXPECT_INT_EQ(mode_of(&s, "layer/sub/run.sh", &uid), 0755);
        mode_of(&s, "layer/link", &uid);
        EXPECT_INT_EQ(uid, 0); /* the link itself */
        EXPECT_TRUE(canary_intact(&s));
        EXPECT_INT_EQ(deps_tree_remove(s.rootfd, "layer"), 0);
        EXPECT_INT_EQ(access(p, F_OK) < 0 && errno == ENOENT, 1);
        EXPECT_TRUE(canary_intact(&s));
        scene_free(&s);
}

TEST(deps_tree_seal_refuses_what_the_installer_does_not_own)
{
        struct scene s;
        REQUIRE_ROOT("deps_tree_seal chowns to root what another account owns");
        scene_make(&s);
        tree_make(&s);
        char p[256];
        snprintf(p, sizeof(p), "%s/layer/sub/file", s.root);
        own(p, 12345); /* another account's file in the tree */
        EXPECT_INT_EQ(deps_tree_seal(s.rootfd, "layer", INSTALLER), -EPERM);
        uid_t uid = 0;
        EXPECT_INT_EQ(mode_of(&s, "layer/sub/file", &uid), 0600);
        EXPECT_INT_EQ(uid, 12345);
        /* a second name for a file: refused too */
        own(p, INSTALLER);
        char q[256];
        snprintf(q, sizeof(q), "%s/layer/hard", s.root);
        EXPECT_INT_EQ(link(p, q), 0);
        EXPECT_INT_EQ(deps_tree_seal(s.rootfd, "layer", INSTALLER), -EPERM);
        EXPECT_INT_EQ(deps_tree_remove(s.rootfd, "layer"), 0);
        EXPECT_INT_EQ(deps_tree_remove(s.rootfd, "layer"), 0); /* gone: fine */
        EXPECT_INT_EQ(deps_tree_remove(s.rootfd, "../etc"), -EINVAL);
        scene_free(&s);
}

/* The installer's account, in a loop: sub/ and file swapped for symlinks
 * to the canaries, and back. */
static _Noreturn void swapper(const struct scene *s)
{
        char sub[256], subx[256], file[256], filex[256];
        snprintf(sub, sizeof(sub), "%s/layer/sub", s->root);
        snprintf(subx, sizeof(subx), "%s/layer/sub.x", s->root);
        snprintf(file, sizeof(file), "%s/layer/file", s->root);
        snprintf(filex, sizeof(filex), "%s/layer/file.x", s->root);
        if (setresgid(INSTALLER, INSTALLER, INSTALLER) < 0 ||
            setresuid(INSTALLER, INSTALLER, INSTALLER) < 0)
                _exit(2);
        for (;;) {
                if (rename(sub, subx) == 0) {
                        if (symlink(s->cdir, sub) == 0)
                                unlink(sub);
                        rename(subx, sub);
                }
                if (rename(file, filex) == 0) {
                        if (symlink(s->canary, file) == 0)
                                unlink(file);
                        rename(filex, file);
                }
        }
}

TEST(deps_tree_seal_and_remove_under_symlink_swaps_never_touch_the_canary)
{
        struct scene s;
        REQUIRE_ROOT("deps_tree_seal chowns to root what another account owns");
        scene_make(&s);
        /* at least 2 s and at least 12 rounds, whichever comes later (a
         * loaded machine runs fewer rounds a second), at most 8 s (the
         * runner gives a case 10) */
        int rounds = 0;
        int64_t start = monotonic_ms(), now;
        do {
                tree_make(&s);
                pid_t pid = fork();
                if (pid == 0)
                        swapper(&s);
                for (int k = 0; k < 20; k++)
                        sched_yield();
                deps_tree_seal(s.rootfd, "layer", INSTALLER); /* may refuse: fine */
                kill(pid, SIGKILL);
                waitpid(pid, NULL, 0);
                EXPECT_TRUE(canary_intact(&s));
                /* and a removal while the swaps go on (the tree the
                 * installer's again) */
                tree_make(&s);
                char p[256];
                snprintf(p, sizeof(p), "%s/layer", s.root);
                own(p, INSTALLER);
                chmod(p, 0755);
                pid = fork();
                if (pid == 0)
                        swapper(&s);
                for (int k = 0; k < 20; k++)
                        sched_yield();
                for (int tries = 0; tries < 100 && deps_tree_remove(s.rootfd, "layer") < 0; tries++)
                        ;
                kill(pid, SIGKILL);
                waitpid(pid, NULL, 0);
                deps_tree_remove(s.rootfd, "layer");
                EXPECT_TRUE(canary_intact(&s));
                rounds++;
                now = monotonic_ms();
        } while ((now - start < 2000 || rounds < 12) && now - start < 8000);
        EXPECT_TRUE(rounds > 10);
        scene_free(&s);
}
