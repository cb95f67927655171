def chat(r, user, prompt, llm):                # 10 requests a minute, 50,000 tokens a day (UTC)
    reqs, toks = f"llm:{{{user}}}:reqs", f"llm:{{{user}}}:tokens"
    day = ("UTC", "DAY", 50_000)
    if r.execute_command("RL.QUOTAPEEK", toks, "*", *day, "COST", 0)[3] == 0:
        return 429, None                        # 1. today's tokens are spent (or overspent)
    if r.execute_command("RL.CHECK", reqs, "*", 10, 60_000)[0] == 1:
        return 429, None                        # 2. admit on requests
    text, used = llm(prompt)                    # 3. serve: only now is the cost known
    if used:                                    # 4. charge it: a debit is never refused
        r.execute_command("RL.QUOTA", toks, "*", *day, "COST", used, "DEBIT")
    return 200, text
