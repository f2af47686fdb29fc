#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# scripts/lint.sh end to end, in a scratch repository holding the project's lint files: a
# change with a use after move, a 90-line function and a misformatted line fails, naming each;
# a clean change passes. Usage: check_lint.sh SOURCE_DIR
set -u
src=$1
root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
cd "$root"
git init -q . && git config user.email lint@test && git config user.name lint
mkdir -p scripts build
cp "$src/scripts/lint.sh" scripts/
cp "$src/.clang-tidy" "$src/.clang-format" .
printf '[{"directory":"%s","file":"%s/a.cpp","command":"c++ -std=c++20 -c %s/a.cpp"}]\n' \
  "$root" "$root" "$root" >build/compile_commands.json
echo 'int one() { return 1; }' >a.cpp
git add -A && git commit -qm base

{
  echo '#include <string>'
  echo '#include <utility>'
  echo 'int one() { return 1; }'
  echo 'std::size_t moved(std::string s) {'
  echo '  std::string t = std::move(s);'
  echo '  return s.size() + t.size();'
  echo '}'
  echo 'int long_one(int x) {'
  for i in $(seq 1 90); do echo "  x += $i;"; done
  echo '  return x;'
  echo '}'
  echo 'int   badly_formatted( ) {return 2;}'
} >a.cpp
git commit -qam bad
out=$(scripts/lint.sh 2>&1) && { echo "FAIL: lint passed a bad change:"; echo "$out"; exit 1; }
for want in "bugprone-use-after-move" "readability-function-size" "clang-format would change"; do
  grep -q "$want" <<<"$out" || { echo "FAIL: lint did not report $want:"; echo "$out"; exit 1; }
done

git reset -q --hard HEAD~1
printf 'int one() { return 1; }\nint two() {\n  return 2;\n}\n' >a.cpp
git commit -qam good
out=$(scripts/lint.sh 2>&1) || { echo "FAIL: lint refused a clean change:"; echo "$out"; exit 1; }
echo "ok: lint refused the bad change (3 findings) and passed the clean one"
