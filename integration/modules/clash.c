/* A test module that registers RL.THROTTLE, as a server with such a core
 * command (valkey-io/valkey#4081) or another module would have it. Built by
 * integration/test_name_clash.py at test time with `cc`. It needs no
 * redismodule.h: the first word of the load context is the server's
 * RedisModule_GetApi, which is what RedisModule_Init reads too. */
typedef int (*GetApi)(const char *name, void *fn);
typedef int (*SetModuleAttribs)(void *ctx, const char *name, int ver, int apiver);
typedef int (*CommandFn)(void *ctx, void **argv, int argc);
typedef int (*CreateCommand)(void *ctx, const char *name, CommandFn fn, const char *flags,
                             int first, int last, int step);
typedef int (*ReplyWithSimpleString)(void *ctx, const char *msg);

static ReplyWithSimpleString reply_simple;

static int clash_throttle(void *ctx, void **argv, int argc) {
    (void)argv;
    (void)argc;
    return reply_simple(ctx, "CLASH");
}

int RedisModule_OnLoad(void **ctx, void **argv, int argc) {
    (void)argv;
    (void)argc;
    GetApi get_api = (GetApi)ctx[0];
    SetModuleAttribs set_attribs;
    CreateCommand create;
    if (get_api("RedisModule_SetModuleAttribs", &set_attribs) ||
        get_api("RedisModule_CreateCommand", &create) ||
        get_api("RedisModule_ReplyWithSimpleString", &reply_simple))
        return 1;
    set_attribs(ctx, "clash", 1, 1);
    return create(ctx, "RL.THROTTLE", clash_throttle, "readonly", 0, 0, 0);
}
