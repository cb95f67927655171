# redis-py: RedisCluster routes RL commands by the key specs it reads at connect.
from redis.cluster import RedisCluster  # rc = RedisCluster(host="10.0.0.1", port=6379)


def rl_on_key_node(rc, key, *args):
    # For a command whose keys Redis marks movable (RL.ALL's numkeys form),
    # redis-py asks COMMAND GETKEYS on every call; naming the node saves that.
    return rc.execute_command(*args, target_nodes=rc.get_node_from_key(key))


def rl(rc, *args):  # e.g. rl(rc, "RL.CHECK", "rl:{user:42}:ocr", "*", 10, 60000)
    if str(args[0]).upper().startswith("RL.ALL"):  # RL.ALL numkeys key [key ...] ...
        return rl_on_key_node(rc, args[2], *args)
    return rc.execute_command(*args)


def rl_pipeline(rc, calls):
    pipe = rc.pipeline()  # each call goes to its own key's node
    for args in calls:
        pipe.execute_command(*args)
    return pipe.execute()
