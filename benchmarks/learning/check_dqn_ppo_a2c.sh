#!/usr/bin/env bash
# Learning checks of the DQN, PPO and A2C recipes (issue 9), three seeds each, run one after the other
# (the machine has two shared cores). Results: benchmarks/learning/results/<algo>-<env>.json and .png.
#   bash benchmarks/learning/check_dqn_ppo_a2c.sh [dqn|ppo|ppo-pendulum|a2c ...]   (default: all four)
# Thresholds and budgets from the issue: DQN and PPO on CartPole-v1 >= 475 within 100k frames,
# A2C on CartPole-v1 >= 475 within 500k, PPO on Pendulum >= -250 within 200k
# (the native PendulumEnv: gymnasium's Pendulum-v1 dynamics, batched in torch).
set -euo pipefail
cd "$(dirname "$0")/../.."
PY=${PYTHON:-python}
RUN="$PY benchmarks/learning/run_recipe.py"
checks=("$@")
[ ${#checks[@]} -eq 0 ] && checks=(dqn ppo ppo-pendulum a2c)
for check in "${checks[@]}"; do
  case "$check" in
    dqn)          $RUN dqn --env CartPole-v1 --frames 100000 --threshold 475 --eval-every 5000 ;;
    ppo)          $RUN ppo --env CartPole-v1 --frames 100000 --threshold 475 --eval-every 4096 ;;
    ppo-pendulum) $RUN ppo --env PendulumEnv --frames 200000 --threshold -250 --eval-every 8192 ;;
    a2c)          $RUN a2c --env CartPole-v1 --frames 500000 --threshold 475 --eval-every 10000 ;;
    *) echo "unknown check $check (dqn, ppo, ppo-pendulum, a2c)" >&2; exit 2 ;;
  esac
done
