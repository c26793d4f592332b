/* SPDX-License-Identifier: (MIT OR GPL-2.0-only) */
/*
 * Lua 5.4's own call stack at each call-chain sample (docs/interpreters.md).
 *
 * Which lua_State a thread runs: uprobes on the C API entries that start running one
 * (lua_resume: a coroutine, with the state that resumed it; lua_pcallk: a C
 * caller runs Lua in the state it holds) record it per thread. A recorded state may have
 * stopped running since (a coroutine that yielded, ended or died): at the sample, the walk
 * climbs to the state that resumed it, then to the main thread, until it finds one that runs.
 * No return probes: a uretprobe rewrites the return address on the stack, which would cut the
 * native unwinding of every sample under lua_resume. While the probes are paused the uprobes
 * are detached (a trap per resume would be in the unprobed CPU) and the recorded state goes
 * stale: from the running state the walk climbs to, it goes down through the calls of
 * coroutine.resume (the C functions the uprobes saw calling lua_resume) to the coroutine that
 * runs, reading only the Lua stacks: the unprobed parts of a run are walked without a trap,
 * from what the probed parts before them learnt.
 *
 * The walk follows L->ci through CallInfo->previous, and on reaching a coroutine's base
 * CallInfo goes on in the state that resumed it, so the frames of the whole thread are there
 * (up to LUA_MAX_FRAMES, leaf first). Per frame: the Proto* and the instruction index of a Lua
 * function (savedpc - code), or 0 for a C function, and the CallInfo's callstatus (CIST_FRESH
 * marks the first frame of a luaV_execute invocation: user space splices the frames into the
 * native chain by it). Everything is read with bpf_probe_read_user: a stale pointer ends the
 * walk, it cannot fault.
 *
 * Offsets: Lua 5.4.4's structures on x86_64 (lstate.h, lobject.h of the lua-src crate's
 * lua-5.4.4 tree, compiled with offsetof); the loader hooks only a Lua whose lua_ident says
 * 5.4.4 (src/lua.rs).
 */
#ifndef LUA_BPF_H
#define LUA_BPF_H

#include "tree.bpf.h"

#define LUA_MAX_FRAMES 32
#define LUA_WALKS 128
/* Iterations of the walk: frames plus state switches. */
#define LUA_WALK_STEPS 40
#define LUA_STATE_HOPS 6

#define LUA_STATE_TT 8
#define LUA_STATE_STATUS 10
#define LUA_STATE_L_G 24
#define LUA_STATE_CI 32
#define LUA_STATE_BASE_CI 96
#define LUA_G_MAINTHREAD 264
#define LUA_LCLOSURE_P 24
#define LUA_PROTO_CODE 64
#define LUA_TT_LCL 0x46 /* ctb(LUA_VLCL): a Lua closure */
#define LUA_TT_LCF 0x16 /* LUA_VLCF: a light C function */
#define LUA_TT_CCL 0x66 /* ctb(LUA_VCCL): a C closure */
#define LUA_VTHREAD 8 /* a thread object's header type */
#define LUA_TT_THREAD 0x48 /* ctb(LUA_VTHREAD): a coroutine */
#define LUA_CCLOSURE_F 24
#define LUA_CCLOSURE_UPVALUE 32
#define LUA_CIST_C 2

/* Set by the loader once it hooked a Lua: other servers' samples skip the walk. */
__u64 lua_on;

struct lua_frame {
	__u64 proto; /* 0: a C function */
	__u32 pc;    /* instruction index past the current one (savedpc - code) */
	__u16 callstatus;
	__u16 state; /* coroutine boundaries crossed before this frame (0: the running state) */
};

struct lua_walk {
	__u64 ns;
	__u32 tid;
	__u16 n;
	__u16 truncated; /* the walk stopped before the thread's first frame */
	struct lua_frame frames[LUA_MAX_FRAMES];
};

struct lua_ring {
	__u64 next;
	struct lua_walk walks[LUA_WALKS];
};

/* The lua_State each thread last started running, by thread id. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, MAX_SAMPLED_THREADS);
	__type(key, __u32);
	__type(value, __u64);
} lua_current SEC(".maps");

/* The state that resumed each coroutine (lua_resume's `from`). */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, __u64);
	__type(value, __u64);
} lua_parent SEC(".maps");

/* The C functions seen calling lua_resume (coroutine.resume, coroutine.wrap's function), by
 * their lua_CFunction: while the uprobes are detached (the probes paused) the walk finds the
 * running coroutine from its resumer's call to one of them (lua_descend). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 64);
	__type(key, __u64);
	__type(value, __u8);
} lua_resumers SEC(".maps");

/* Per thread that runs Lua: its latest walks at samples, a ring the loader reads. */
struct {
	/* 17 KiB a thread, preallocated: 2 MiB for 128 threads that run Lua. */
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 128);
	__type(key, __u32);
	__type(value, struct lua_ring);
} lua_walks SEC(".maps");

/* A zeroed ring to start a thread's from: one shared entry, since a per-CPU value is capped at
 * 32 KiB and a ring holds as many walks as the sample tags keep (src/tags.rs), so a sample's walk
 * is still there whenever its tag is. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct lua_ring);
} lua_scratch SEC(".maps");

static __always_inline __u64 lua_read_u64(__u64 addr)
{
	__u64 v = 0;

	bpf_probe_read_user(&v, sizeof(v), (void *)addr);
	return v;
}

/* The fields of a CallInfo the walk reads (func 0, previous 16, savedpc 32, callstatus 62),
 * in one read of its 64 bytes. */
struct lua_callinfo {
	__u64 func;
	__u64 top;
	__u64 previous;
	__u64 next;
	__u64 savedpc;
	__u8 rest[22];
	__u16 callstatus;
};

/* A TValue: its value, then its tag. */
struct lua_tvalue {
	__u64 value;
	__u64 tag;
};

/* The lua_CFunction of the C function state L runs (0 when it runs a Lua function), with its
 * CallInfo and the function's TValue. */
static __always_inline __u64 lua_cfunction(__u64 L, struct lua_callinfo *ci, struct lua_tvalue *func)
{
	__u64 f = 0;

	if (bpf_probe_read_user(ci, sizeof(*ci), (void *)lua_read_u64(L + LUA_STATE_CI)) ||
	    !(ci->callstatus & LUA_CIST_C) ||
	    bpf_probe_read_user(func, sizeof(*func), (void *)ci->func))
		return 0;
	if ((__u8)func->tag == LUA_TT_LCF)
		f = func->value;
	else if ((__u8)func->tag == LUA_TT_CCL)
		f = lua_read_u64(func->value + LUA_CCLOSURE_F);
	return f;
}

static __always_inline int lua_enter(__u64 L, __u64 from)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tid = (__u32)id;

	if (!tracked_tgid(id >> 32) || !L)
		return 0;
	bpf_map_update_elem(&lua_current, &tid, &L, BPF_ANY);
	if (from && from != L) {
		struct lua_callinfo ci;
		struct lua_tvalue func;
		__u64 f = lua_cfunction(from, &ci, &func);
		__u8 one = 1;

		bpf_map_update_elem(&lua_parent, &L, &from, BPF_ANY);
		if (f)
			bpf_map_update_elem(&lua_resumers, &f, &one, BPF_ANY);
	}
	return 0;
}

SEC("uprobe")
int BPF_KPROBE(lua_resume_enter, void *L, void *from)
{
	return lua_enter((__u64)L, (__u64)from);
}

SEC("uprobe")
int BPF_KPROBE(lua_run_enter, void *L)
{
	return lua_enter((__u64)L, 0);
}

/* Whether L is a state that runs: a thread object (its header's type; a state freed and its
 * memory reused, which a thread's recorded state can be once the probes stopped following it,
 * fails this), not suspended or dead, and inside a call. */
static __always_inline bool lua_running(__u64 L)
{
	__u8 head[4] = { 0, 0, 1, 0 }; /* tt, marked, status, allowhook */

	bpf_probe_read_user(head, sizeof(head), (void *)(L + LUA_STATE_TT));
	return head[0] == LUA_VTHREAD && head[LUA_STATE_STATUS - LUA_STATE_TT] == 0 &&
	       lua_read_u64(L + LUA_STATE_CI) != L + LUA_STATE_BASE_CI;
}

/* The state that resumed L, else L's main thread (0 when L is it). */
static __always_inline __u64 lua_resumer(__u64 L)
{
	__u64 *p = bpf_map_lookup_elem(&lua_parent, &L);
	__u64 main;

	if (p)
		return *p;
	main = lua_read_u64(lua_read_u64(L + LUA_STATE_L_G) + LUA_G_MAINTHREAD);
	return main == L ? 0 : main;
}

/* The coroutine state L is resuming, when its running C function is one seen calling
 * lua_resume: coroutine.resume's first argument, or the coroutine coroutine.wrap's function
 * holds as its upvalue. 0 otherwise. */
static __always_inline __u64 lua_resumed(__u64 L)
{
	struct lua_callinfo ci;
	struct lua_tvalue func, co;
	__u64 f = lua_cfunction(L, &ci, &func);

	if (!f || !bpf_map_lookup_elem(&lua_resumers, &f))
		return 0;
	if (!bpf_probe_read_user(&co, sizeof(co), (void *)(ci.func + sizeof(co))) &&
	    (__u8)co.tag == LUA_TT_THREAD)
		return co.value;
	if ((__u8)func.tag == LUA_TT_CCL &&
	    !bpf_probe_read_user(&co, sizeof(co), (void *)(func.value + LUA_CCLOSURE_UPVALUE)) &&
	    (__u8)co.tag == LUA_TT_THREAD)
		return co.value;
	return 0;
}

/* From running state L down to the coroutine the thread runs: the uprobes name the state a
 * thread entered last, which is stale when they were detached since (coroutines resumed
 * unseen). Each state found is recorded as resumed by the one above, for the walk up. */
static __always_inline __u64 lua_descend(__u64 L)
{
	__u64 co;
	int i;

	for (i = 0; i < LUA_STATE_HOPS; i++) {
		co = lua_resumed(L);
		if (!co || co == L || !lua_running(co))
			break;
		bpf_map_update_elem(&lua_parent, &co, &L, BPF_ANY);
		L = co;
	}
	return L;
}

/* The thread's next walk slot. */
static __always_inline struct lua_walk *lua_slot(__u32 tid)
{
	struct lua_ring *ring = bpf_map_lookup_elem(&lua_walks, &tid);
	__u32 zero = 0;

	if (!ring) {
		ring = bpf_map_lookup_elem(&lua_scratch, &zero);
		if (!ring)
			return NULL;
		bpf_map_update_elem(&lua_walks, &tid, ring, BPF_NOEXIST);
		ring = bpf_map_lookup_elem(&lua_walks, &tid);
		if (!ring)
			return NULL;
	}
	return &ring->walks[ring->next++ & (LUA_WALKS - 1)];
}

/* The walk's position, carried from one bpf_loop step to the next: a loop over map lookups
 * and reads is too large for the verifier to unroll or explore whole. */
struct lua_cursor {
	__u64 L;
	__u64 ci;
	struct lua_walk *w;
	__u16 n;
	__u16 states;
};

static long lua_step(__u64 index, void *ctx)
{
	struct lua_cursor *c = ctx;
	struct lua_walk *w = c->w;
	struct lua_callinfo ci;
	struct lua_frame *f;
	__u64 func[2], proto = 0;

	if (!w)
		return 1;
	if (c->ci == c->L + LUA_STATE_BASE_CI || !c->ci) {
		/* A coroutine's first frame: go on in the state that resumed it. */
		c->L = c->ci ? lua_resumer(c->L) : 0;
		if (!c->L) {
			w->truncated = 0;
			return 1;
		}
		c->ci = lua_read_u64(c->L + LUA_STATE_CI);
		c->states++;
		return 0;
	}
	if (c->n >= LUA_MAX_FRAMES || bpf_probe_read_user(&ci, sizeof(ci), (void *)c->ci))
		return 1;
	/* The called value: a TValue, its pointer then its tag. */
	if (bpf_probe_read_user(func, sizeof(func), (void *)ci.func))
		return 1;
	f = &w->frames[c->n & (LUA_MAX_FRAMES - 1)];
	f->pc = 0;
	if ((__u8)func[1] == LUA_TT_LCL && !(ci.callstatus & LUA_CIST_C)) {
		proto = lua_read_u64(func[0] + LUA_LCLOSURE_P);
		f->pc = (ci.savedpc - lua_read_u64(proto + LUA_PROTO_CODE)) / 4;
	}
	f->proto = proto;
	f->callstatus = ci.callstatus;
	f->state = c->states;
	c->n++;
	w->n = c->n;
	c->ci = ci.previous;
	return 0;
}

static __always_inline void lua_sample(__u32 tid, __u32 tgid)
{
	struct lua_cursor c = {};
	__u64 *cur;
	int i;

	/* bpf_loop is Linux 5.17+: on older kernels the verifier drops the walk, not the object. */
	if (!bpf_core_enum_value_exists(enum bpf_func_id, BPF_FUNC_loop))
		return;
	if (!lua_on || !tracked_tgid(tgid))
		return;
	cur = bpf_map_lookup_elem(&lua_current, &tid);
	if (!cur)
		return;
	c.L = *cur;
	for (i = 0; i < LUA_STATE_HOPS && c.L && !lua_running(c.L); i++)
		c.L = lua_resumer(c.L);
	if (!c.L || !lua_running(c.L))
		return;
	c.L = lua_descend(c.L);
	c.w = lua_slot(tid);
	if (!c.w)
		return;
	c.w->ns = bpf_ktime_get_ns();
	c.w->tid = tid;
	c.w->n = 0;
	c.w->truncated = 1;
	c.ci = lua_read_u64(c.L + LUA_STATE_CI);
	bpf_loop(LUA_WALK_STEPS, lua_step, &c, 0);
}

#endif
