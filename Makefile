# lockbox build: `make` builds build/lockboxd, build/lockbox-pyzygote (its
# warm Python template) and build/lockbox (the client), `make test`
# runs the unit and integration suites, `make run` starts the daemon on
# conf/config.yaml. SAN=address,undefined builds everything with sanitizers.

CC       ?= cc
BUILD    ?= build
PKGS     := libmicrohttpd jansson yaml-0.1 libseccomp
PYTHON   ?= /usr/bin/python3
CONFIG   ?= conf/config.yaml

# Recursive (=) so pkg-config runs only when a recipe needs it, after
# scripts/install-deps had the chance to install it on a fresh machine.
PKG_CFLAGS = $(shell pkg-config --cflags $(PKGS))
PKG_LIBS   = $(shell pkg-config --libs $(PKGS))
# The lockbox client alone links libcurl; the daemon never does.
CLI_PKGS   := libcurl jansson
CLI_CFLAGS = $(shell pkg-config --cflags $(CLI_PKGS))
CLI_LIBS   = $(shell pkg-config --libs $(CLI_PKGS))
# The Python zygote embeds the interpreter python_path must name (Debian's).
ZYG_CFLAGS = $(patsubst -I%,-isystem %,$(shell pkg-config --cflags python3-embed)) \
             -DLOCKBOX_PYTHON_EXECUTABLE='"$(shell readlink -f $(PYTHON))"'
ZYG_LIBS   = $(shell pkg-config --libs python3-embed) $(LIBS)

WARN     := -Wall -Wextra -Werror -Wshadow -Wformat=2 -Wno-format-truncation \
            -Wstrict-prototypes -Wmissing-prototypes -Wpointer-arith \
            -Wwrite-strings -Wundef -Wvla -Wnull-dereference \
            -Wimplicit-fallthrough -Wno-unused-parameter
HARDEN   := -D_FORTIFY_SOURCE=2 -fstack-protector-strong -fstack-clash-protection \
            -fPIE -fcf-protection
CFLAGS   ?= -O2 -g
ALL_CFLAGS = -std=c11 -D_GNU_SOURCE $(WARN) $(HARDEN) $(CFLAGS) -Isrc $(PKG_CFLAGS) -MMD -MP
LDFLAGS  ?=
ALL_LDFLAGS = -pie -Wl,-z,relro,-z,now -Wl,-z,noexecstack $(LDFLAGS)
LIBS     = $(PKG_LIBS) -lpthread

ifneq ($(SAN),)
  # Sanitizer builds: _FORTIFY_SOURCE conflicts with ASan's interceptors.
  HARDEN := -fstack-protector-strong -fPIE
  CFLAGS := -O1 -g -fno-omit-frame-pointer -fsanitize=$(SAN) -fno-sanitize-recover=all
  LDFLAGS += -fsanitize=$(SAN)
  BUILD := build/san
endif

LIB_SRCS  := $(sort $(wildcard src/base/*.c src/config/*.c src/http/*.c \
                     src/ipc/*.c src/jail/*.c src/runtime/*.c \
                     src/pool/*.c src/daemon/*.c))
LIB_OBJS  := $(LIB_SRCS:%.c=$(BUILD)/%.o)
UNIT_SRCS := $(sort $(wildcard tests/unit/*.c))
UNIT_OBJS := $(UNIT_SRCS:%.c=$(BUILD)/%.o)
CLI_SRCS  := $(sort $(wildcard src/cli/*.c))
CLI_OBJS  := $(CLI_SRCS:%.c=$(BUILD)/%.o)
ZYG_SRCS  := $(sort $(wildcard src/zygote/*.c))
ZYG_OBJS  := $(ZYG_SRCS:%.c=$(BUILD)/%.o)

.PHONY: all deps run test unit integration integration-cold clean format

all: $(BUILD)/lockboxd $(BUILD)/lockbox $(BUILD)/lockbox-pyzygote

deps:
	@scripts/install-deps

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -c $< -o $@

$(BUILD)/liblockbox.a: $(LIB_OBJS)
	@rm -f $@
	ar rcs $@ $^

$(BUILD)/lockboxd: $(BUILD)/src/main.o $(BUILD)/liblockbox.a
	$(CC) $(ALL_LDFLAGS) -o $@ $^ $(LIBS)

$(CLI_OBJS): ALL_CFLAGS += $(CLI_CFLAGS)

$(BUILD)/lockbox: $(CLI_OBJS) $(BUILD)/liblockbox.a
	$(CC) $(ALL_LDFLAGS) -o $@ $^ $(CLI_LIBS)

$(ZYG_OBJS): ALL_CFLAGS += $(ZYG_CFLAGS)

$(BUILD)/lockbox-pyzygote: $(ZYG_OBJS) $(BUILD)/liblockbox.a
	$(CC) $(ALL_LDFLAGS) -o $@ $^ $(ZYG_LIBS)

$(BUILD)/unit_tests: $(UNIT_OBJS) $(BUILD)/liblockbox.a
	$(CC) $(ALL_LDFLAGS) -o $@ $^ $(LIBS)

run: all
	$(BUILD)/lockboxd --config $(CONFIG)

unit: $(BUILD)/unit_tests
	$(BUILD)/unit_tests

# The suite runs against warm daemons (the default), then again cold.
integration: all
	LOCKBOXD=$(abspath $(BUILD)/lockboxd) LOCKBOX=$(abspath $(BUILD)/lockbox) \
	  $(PYTHON) -m pytest -q -p no:cacheprovider tests/integration

integration-cold: all
	LOCKBOX_TEST_MODE=cold LOCKBOXD=$(abspath $(BUILD)/lockboxd) \
	  LOCKBOX=$(abspath $(BUILD)/lockbox) \
	  $(PYTHON) -m pytest -q -p no:cacheprovider tests/integration

test: unit integration integration-cold

format:
	clang-format -i $(shell find src tests -name '*.[ch]')

clean:
	rm -rf build

-include $(LIB_OBJS:.o=.d) $(UNIT_OBJS:.o=.d) $(CLI_OBJS:.o=.d) $(ZYG_OBJS:.o=.d) \
         $(BUILD)/src/main.d
