# ptybroker shell integration (runner/agent/shell-integration.ts): what a login shell reads, then
# OSC 133 marks around the prompt, the command line and each command's output.
if [ -r /etc/profile ]; then . /etc/profile; fi
if [ -r ~/.bash_profile ]; then . ~/.bash_profile
elif [ -r ~/.bash_login ]; then . ~/.bash_login
elif [ -r ~/.profile ]; then . ~/.profile
fi

# D;<status>: the command has ended. Runs first when a prompt is due, and keeps $? as it found it,
# so the user's PROMPT_COMMAND and a $? in PS1 still see the command's status.
__ptyb_d() {
  local s=$?
  printf '\033]133;D;%s\007' "$s"
  return $s
}

# A at the start of PS1 and B at its end (zero-width, inside \[ \]), C at the end of PS0 (printed
# once a command line is read, before it runs; not for an empty line). PS1 starts with a D of its
# own too (bash keeps $? across PROMPT_COMMAND): if PROMPT_COMMAND is replaced, commands still end
# with their status (a D after a D is ignored). Runs last, so it puts back what dotfiles or the
# user took out since, and keeps __ptyb_d first in PROMPT_COMMAND.
__ptyb_marks() {
  local s=$?
  case ${PS1-} in *'\[\e]133;A\a\]'*) ;; *) PS1='\[\e]133;A\a\]'"${PS1-}" ;; esac
  case ${PS1-} in *'\[\e]133;D;$?\a\]'*) ;; *) PS1='\[\e]133;D;$?\a\]'"${PS1-}" ;; esac
  case ${PS1-} in *'\[\e]133;B\a\]') ;; *) PS1="${PS1-}"'\[\e]133;B\a\]' ;; esac
  case ${PS0-} in *'\e]133;C\a') ;; *) PS0="${PS0-}"'\e]133;C\a' ;; esac
  if [[ ${PROMPT_COMMAND@a} == *a* ]]; then
    [[ ${PROMPT_COMMAND[0]-} == __ptyb_d ]] || PROMPT_COMMAND=(__ptyb_d "${PROMPT_COMMAND[@]}")
    [[ ${PROMPT_COMMAND[-1]} == __ptyb_marks ]] || PROMPT_COMMAND+=(__ptyb_marks)
  else
    [[ ${PROMPT_COMMAND-} == __ptyb_d$'\n'* ]] || PROMPT_COMMAND=__ptyb_d$'\n'"${PROMPT_COMMAND-}"
    [[ $PROMPT_COMMAND == *$'\n'__ptyb_marks ]] || PROMPT_COMMAND+=$'\n'__ptyb_marks
  fi
  return $s
}

__ptyb_marks
