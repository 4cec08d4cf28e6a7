#!/usr/bin/env bash
# CI cannot pass by skipping (issue 39 §8): each test that skips when a prerequisite is
# absent is run the way .ci/run runs it (its MEMWALL_REQUIRE_* variables), once with
# that prerequisite hidden, which must FAIL, and once as it is, which must pass.
# The last case runs .ci/run itself (scripts/test.sh with MEMWALL_ONLY selecting one
# step) with qemu-aarch64 hidden: the whole command must exit non-zero and name the step.
#
# usage: scripts/ci-skip-drill.sh        (needs the suite's set-up: scripts/setup-tests.sh)
# Prints one line per run and "drill: N of N as expected"; exits 1 on any surprise.
set -uo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/memwall/target}"
ci_env=(MEMWALL_REQUIRE_MODELS=1 MEMWALL_REQUIRE_LLAMA_TOOLS=1 MEMWALL_REQUIRE_E2E=1
  MEMWALL_REQUIRE_SANDBOX=1 MEMWALL_REQUIRE_CROSS=1)
# shellcheck source=scripts/features.sh
. scripts/features.sh
feat=(${MEMWALL_FEATURES:+--features "memwall-cli/$MEMWALL_FEATURES"})
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT

# path_without PROG...: a PATH of one folder linking every program on $PATH but PROG.
path_without() {
  local d
  d=$(mktemp -d -p "$logs")
  local IFS=:
  for dir in $PATH; do
    [ -d "$dir" ] || continue
    for f in "$dir"/*; do
      local b=${f##*/}
      [ -x "$f" ] && [ ! -e "$d/$b" ] || continue
      case " $* " in *" $b "*) continue ;; esac
      ln -s "$f" "$d/$b"
    done
  done
  echo "$d"
}

n=0 ok=0
# case NAME EXPECT(fail|pass) GREP CMD...: runs CMD under .ci/run's variables; with
# EXPECT=fail the output must also contain GREP (the refusal names what is missing).
case_() {
  local name=$1 expect=$2 want=$3
  shift 3
  n=$((n + 1))
  local log="$logs/$n.log" t0=$SECONDS
  env "${ci_env[@]}" "$@" >"$log" 2>&1
  local rc=$?
  local got=pass
  [ $rc -eq 0 ] || got=fail
  local why=""
  if [ "$got" = fail ]; then
    why=$(grep -m1 -E -- "$want" "$log" | cut -c1-200)
  fi
  if [ "$got" = "$expect" ] && { [ "$expect" = pass ] || [ -n "$why" ]; }; then
    ok=$((ok + 1))
    printf 'drill %-58s expected %-4s got %-4s (exit %d, %d s)%s\n' "$name" "$expect" "$got" "$rc" "$((SECONDS - t0))" "${why:+: $why}"
  else
    printf 'drill %-58s expected %-4s got %-4s (exit %d, %d s): SURPRISE, last lines:\n' "$name" "$expect" "$got" "$rc" "$((SECONDS - t0))"
    tail -15 "$log" | sed 's/^/    /'
  fi
}

no_qemu=$(path_without qemu-aarch64)
no_python=$(path_without python3)
no_driver=$(path_without tauri-driver)
empty=$(mktemp -d -p "$logs")

case_ "aarch64 peak check, qemu-aarch64 hidden" fail "FAILED: .*qemu-user" \
  env PATH="$no_qemu" ./scripts/check-aarch64-peak.sh
case_ "aarch64 peak check, as installed" pass "" ./scripts/check-aarch64-peak.sh

case_ "loadtest vs llama-server test, llama-server absent" fail "llama-server at .* is required" \
  env LLAMA_SERVER=/nonexistent/llama-server cargo test --release --locked --workspace "${feat[@]}" --lib \
  -- --exact experiments::loadtest::job::tests::a_short_run_against_llama_server
case_ "loadtest vs llama-server test, as installed" pass "" \
  cargo test --release --locked --workspace "${feat[@]}" --lib \
  -- --exact experiments::loadtest::job::tests::a_short_run_against_llama_server

case_ "tests/cli.rs speculative table test, python3 hidden" fail "python3 .* is required" \
  env PATH="$no_python" cargo test --release --locked --workspace "${feat[@]}" --test cli \
  -- --exact vs_llama_speculative_prints_no_auto_ratio_for_an_off_decision
case_ "tests/cli.rs speculative table test, as installed" pass "" \
  cargo test --release --locked --workspace "${feat[@]}" --test cli \
  -- --exact vs_llama_speculative_prints_no_auto_ratio_for_an_off_decision

case_ "a model test, models folder empty" fail "is required \(MEMWALL_REQUIRE_MODELS=1\)" \
  env MEMWALL_MODELS="$empty" cargo test --release --locked --workspace "${feat[@]}" --test cli \
  -- --exact roofline_with_given_numbers_matches_the_closed_form
case_ "a model test, as installed" pass "" \
  cargo test --release --locked --workspace "${feat[@]}" --test cli -- --exact roofline_with_given_numbers_matches_the_closed_form

case_ "app end-to-end, tauri-driver absent" fail "SKIPPED app end-to-end test: tauri-driver" \
  env PATH="$no_driver" HOME="$empty" tests/e2e/run.sh

case_ ".ci/run (only the aarch64 step), qemu-aarch64 hidden" fail "FAILED: aarch64 compute-peak" \
  env PATH="$no_qemu" MEMWALL_ONLY=aarch64 ./.ci/run
case_ ".ci/run (only the aarch64 step), as installed" pass "" env MEMWALL_ONLY=aarch64 ./.ci/run

echo "drill: $ok of $n as expected"
[ "$ok" = "$n" ]
