"""Where the time goes: machine limits, profiles, the anatomy and call depth of a tagging call, exact outputs."""
