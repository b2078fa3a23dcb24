;;; ask_test.el --- lode.el in real Emacs, in batch  -*- lexical-binding: t; -*-
;; Driven by server/lode/tests/it/emacs.rs: Emacs (Debian's emacs-nox with elpa-eglot) starts
;; the real `lode serve' through Eglot for a note of a vault, asks the question on its third
;; line with `lode-ask', then hovers and follows a citation of the answer, and asks for the
;; status line. What it saw goes to $LODE_OUT as JSON.

(require 'json)
;; Eglot from Debian's elpa-eglot (under /usr/share/emacs/site-lisp/elpa), as `emacs -Q' does not
;; activate installed packages by itself.
(require 'package)
(add-to-list 'package-directory-list "/usr/share/emacs/site-lisp/elpa")
(package-initialize)
(add-to-list 'load-path (getenv "LODE_PLUGIN"))
(require 'lode)
(setq lode-program (getenv "LODE_BIN"))
;; markdown-mode is not part of Emacs: a stand-in with its name (the user installs the real one).
(unless (fboundp 'markdown-mode)
  (define-derived-mode markdown-mode text-mode "Markdown"))
(setq eglot-sync-connect 30
      eglot-autoshutdown nil
      eglot-events-buffer-size 0
      ;; A message the server sends while Emacs exits is not this test's failure.
      debug-on-error nil)

(defun lode-test--wait (pred secs what)
  "Wait up to SECS for PRED, or signal that WHAT did not happen."
  (let ((deadline (+ (float-time) secs)))
    (while (and (not (funcall pred)) (< (float-time) deadline))
      (accept-process-output nil 0.1))
    (unless (funcall pred) (error "Timed out waiting for %s" what))))

(let ((out (getenv "LODE_OUT"))
      (result nil))
  (condition-case err
      (progn
        (find-file (getenv "LODE_NOTE"))
        (markdown-mode)
        (apply #'eglot (eglot--guess-contact))
        (lode-test--wait (lambda () (eglot-current-server)) 60 "lode to start")
        (let ((server (eglot-current-server)))
          (push (cons "root" (expand-file-name (project-root (eglot--project server)))) result)
          ;; The first scan ends: the vault's notes are in the index.
          (lode-test--wait (lambda () (not (eq t (plist-get (jsonrpc-request server :lode/status nil) :scanning))))
                           120 "the first scan")
          (goto-char (point-min))
          (forward-line 2)
          (lode-ask (line-beginning-position) (line-end-position))
          (push (cons "lines" (vconcat (split-string (buffer-substring-no-properties (point-min) (point-max)) "\n"))) result)
          ;; A citation of the answer: a markdown link whose title starts "lode ".
          (goto-char (point-min))
          (when (re-search-forward "\\[[^]\n]*\\]([^ )\n]* \"lode " nil t)
            (goto-char (1+ (match-beginning 0)))
            ;; The edit reaches the server first, as Eglot's own requests send it.
            (eglot--signal-textDocument/didChange)
            (let* ((params (eglot--TextDocumentPositionParams))
                   (hover (jsonrpc-request server :textDocument/hover params))
                   (defs (jsonrpc-request server :textDocument/definition params)))
              (push (cons "hover" (let ((c (plist-get hover :contents))) (if (stringp c) c (plist-get c :value)))) result)
              (push (cons "definition" (let ((d (if (vectorp defs) (aref defs 0) defs))) (or (plist-get d :uri) (plist-get d :targetUri)))) result)))
          (push (cons "status" (lode-status)) result)
          ;; Stopped here, while this script still handles what the server sends (a progress
          ;; bar of the vector thread's first round, say): not by `kill-emacs' under it.
          (let ((eglot-autoshutdown nil))
            (ignore-errors (eglot-shutdown server)))))
    (error (push (cons "error" (error-message-string err)) result)))
  (ignore-errors (with-temp-file out (insert (json-encode result))))
  (setq kill-emacs-hook nil)
  (kill-emacs 0))
