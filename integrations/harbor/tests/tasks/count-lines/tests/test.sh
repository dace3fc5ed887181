#!/bin/bash
# Reward 1 when the answer and the greeting are right, else 0.
mkdir -p /logs/verifier
if [ "$(cat /app/answer.txt 2>/dev/null)" = "3" ] \
  && [ "$(cat /app/greeting.txt 2>/dev/null)" = "hello from task.toml" ]; then
  echo 1 > /logs/verifier/reward.txt
else
  echo 0 > /logs/verifier/reward.txt
fi
