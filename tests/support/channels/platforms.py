"""Builds the requests Telegram, Slack and Discord send a bot, with the platforms' own SDKs.

Each command prints one JSON object: {"headers": {...}, "body": "<the exact body>"}. The tests
post it to `turnstile serve --channels` as it is, so what turnstile reads is what the SDKs make.

  telegram-update UPDATE_ID CHAT_ID USER_ID TEXT [THREAD_ID]   (python-telegram-bot's Update)
  slack-event SECRET TIMESTAMP CHANNEL USER TS TEXT [THREAD_TS] (signed as slack_sdk verifies)
  slack-url-check SECRET TIMESTAMP CHALLENGE
  discord-key SEED_HEX                                          (the application's public key)
  discord-interaction SEED_HEX TIMESTAMP BODY_JSON              (signed with PyNaCl)
"""

import datetime
import json
import sys


def telegram_update(update_id, chat_id, user_id, text, thread_id=None):
    import telegram

    chat = telegram.Chat(id=int(chat_id), type="supergroup" if thread_id else "private")
    user = telegram.User(id=int(user_id), first_name="Tester", is_bot=False)
    message = telegram.Message(
        message_id=int(update_id) * 10,
        date=datetime.datetime.now(datetime.timezone.utc),
        chat=chat,
        from_user=user,
        text=text,
        message_thread_id=int(thread_id) if thread_id else None,
        is_topic_message=True if thread_id else None,
    )
    update = telegram.Update(update_id=int(update_id), message=message)
    # Read back the way a bot built on the SDK reads it: the JSON is a valid Update.
    again = telegram.Update.de_json(json.loads(update.to_json()), None)
    assert again.message.text == text
    return {"headers": {}, "body": update.to_json()}


def slack_signed(secret, timestamp, body):
    from slack_sdk.signature import SignatureVerifier

    verifier = SignatureVerifier(signing_secret=secret)
    signature = verifier.generate_signature(timestamp=timestamp, body=body)
    # The SDK's own check accepts it only within its five minutes; a deliberately old timestamp
    # is for turnstile to refuse.
    return {
        "headers": {
            "X-Slack-Request-Timestamp": timestamp,
            "X-Slack-Signature": signature,
            "Content-Type": "application/json",
        },
        "body": body,
    }


def slack_event(secret, timestamp, channel, user, ts, text, thread_ts=None):
    event = {"type": "message", "channel": channel, "user": user, "text": text, "ts": ts}
    if thread_ts:
        event["thread_ts"] = thread_ts
    body = json.dumps(
        {
            "type": "event_callback",
            "team_id": "T1",
            "api_app_id": "A1",
            "event": event,
            "event_id": "Ev" + ts.replace(".", ""),
            "event_time": int(timestamp),
        }
    )
    return slack_signed(secret, timestamp, body)


def slack_url_check(secret, timestamp, challenge):
    body = json.dumps({"token": "t", "challenge": challenge, "type": "url_verification"})
    return slack_signed(secret, timestamp, body)


def discord_key(seed_hex):
    import nacl.signing

    key = nacl.signing.SigningKey(bytes.fromhex(seed_hex))
    return {"public_key": key.verify_key.encode().hex()}


def discord_interaction(seed_hex, timestamp, body):
    import nacl.signing

    key = nacl.signing.SigningKey(bytes.fromhex(seed_hex))
    signed = key.sign((timestamp + body).encode())
    return {
        "headers": {
            "X-Signature-Ed25519": signed.signature.hex(),
            "X-Signature-Timestamp": timestamp,
            "Content-Type": "application/json",
        },
        "body": body,
    }


COMMANDS = {
    "telegram-update": telegram_update,
    "slack-event": slack_event,
    "slack-url-check": slack_url_check,
    "discord-key": discord_key,
    "discord-interaction": discord_interaction,
}

if __name__ == "__main__":
    print(json.dumps(COMMANDS[sys.argv[1]](*sys.argv[2:])))
