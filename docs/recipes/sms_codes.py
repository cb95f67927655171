SMS = ("CHECK", 1, 1, 60_000, 5, 86_400_000,    # per phone: 1 a minute, 5 a day
       "CHECK", 2, 20, 3_600_000,               # per IP: 20 an hour
       "QUOTA", 3, "UTC", "DAY", 10_000)        # every phone: 10,000 a UTC day


def send_code(r, phone, ip, deliver):
    keys = (f"sms:phone:{phone}", f"sms:ip:{ip}", "sms:global")
    reply = r.execute_command("RL.ALL", 3, *keys, "*", *SMS)
    if reply[0] == 1:
        return 429, reply[1]                    # which limit: 1 phone, 2 IP, 3 global
    if not deliver(phone):
        r.execute_command("RL.ALL", 3, *keys, "*", *SMS, "REFUND")
        return 502, 0
    return 200, 0
