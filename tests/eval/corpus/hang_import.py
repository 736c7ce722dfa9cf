# threat: 13 (hang): never finishes loading
# task: smoke/5
# expect: timeout/compile_timeout
# limits: compile_timeout_s=6
while True:
    pass
