/* Unit tests for base/file.c: whole files and descriptors read and
 * written in one call, with their limits. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include "base/file.h"
#include "base/strbuf.h"
#include "test.h"

static void temp_path(char *buf, size_t len)
{
        snprintf(buf, len, "/tmp/lockbox-test-file.%ld", (long)getpid());
}

TEST(file_write_then_read)
{
        char path[64], buf[8];
        struct strbuf sb;
        temp_path(path, sizeof(path));
        unlink(path);
        EXPECT_INT_EQ(file_write(path, "hello world", O_CREAT | O_EXCL, 0600), 0);
        EXPECT_INT_EQ(file_write(path, "again", O_CREAT | O_EXCL, 0600), -EEXIST);
        EXPECT_INT_EQ(file_read_buf(path, buf, sizeof(buf)), 7);
        EXPECT_STR_EQ(buf, "hello w");
        EXPECT_INT_EQ(file_read(path, 0, 64, &sb), 0);
        EXPECT_STR_EQ(sb.data, "hello world");
        strbuf_free(&sb);
        EXPECT_INT_EQ(file_read(path, 0, 4, &sb), -E2BIG);
        unlink(path);
        EXPECT_INT_EQ(file_read_buf(path, buf, sizeof(buf)), -ENOENT);
        EXPECT_STR_EQ(buf, "");
}

TEST(file_read_refuses_what_is_not_a_regular_file)
{
        struct strbuf sb;
        EXPECT_INT_EQ(file_read("/dev/null", 0, 64, &sb), -EINVAL);
        EXPECT_INT_EQ(file_read("/tmp", 0, 64, &sb), -EISDIR);
}

TEST(file_read_fd_to_the_end_and_past_the_limit)
{
        int p[2];
        struct strbuf sb;
        EXPECT_INT_EQ(pipe(p), 0);
        EXPECT_INT_EQ(write(p[1], "0123456789", 10), 10);
        close(p[1]);
        strbuf_init(&sb, 5);
        EXPECT_INT_EQ(file_read_fd(p[0], &sb), -E2BIG);
        strbuf_free(&sb);
        close(p[0]);
        EXPECT_INT_EQ(pipe(p), 0);
        EXPECT_INT_EQ(write(p[1], "abc", 3), 3);
        close(p[1]);
        strbuf_init(&sb, 0);
        EXPECT_INT_EQ(file_read_fd(p[0], &sb), 0);
        EXPECT_SIZE_EQ(sb.len, 3);
        strbuf_free(&sb);
        close(p[0]);
}
