"""The starter's agents: a small shop assistant under test, and the customer it is tested with.

Each is called as ``send(messages, options)``: ``messages`` the conversation so far as
OpenAI-style chat messages, the last one the user's. Replace ``assistant`` with a call to your agent.
"""

import json

PRICES = {"apples": 3, "bread": 2, "cheese": 7}


def assistant(messages, options):
    """The agent under test: answers greetings, prices and orders."""
    text = messages[-1]["content"].lower()
    asked = [item for item in PRICES if item in text]
    if "order" in text or "buy" in text:
        if not asked:
            return "What would you like to order? We have apples, bread and cheese."
        total = sum(PRICES[item] for item in asked)
        return f"Ordered {', '.join(asked)}: {total} EUR in total."
    if asked:  # a question: the farm reads the agent as awaiting the user's answer
        return " ".join(f"{item.capitalize()} cost {PRICES[item]} EUR." for item in asked) + " Would you like to order?"
    if "thank" in text or "bye" in text:
        return "Thank you for shopping with us. Goodbye!"
    return "Hello! I can tell you our prices or take an order."


def customer(messages, options):
    """The simulated user of a dynamic case: asks a price, orders, says goodbye. It answers
    ``{"input": ..., "goal_achieved": ...}`` (docs/simulator.md)."""
    turn = options["metadata"]["turn_number"]
    script = ["How much is the cheese?", "I'd like to order cheese and bread, please.", "Thanks, bye!"]
    if turn > len(script):
        return json.dumps({"goal_achieved": True, "reasoning": "the order is placed"})
    return json.dumps({"input": script[turn - 1], "goal_achieved": False})
