;;; lode.el --- Ask your markdown notes with lode, through Eglot  -*- lexical-binding: t; -*-

;; Version: 0.1.0
;; Package-Requires: ((emacs "28.1") (eglot "1.9"))
;; Keywords: tools, outlines, hypermedia
;; URL: https://github.com/lode-notes/lode

;;; Commentary:

;; lode is a language server for a folder of markdown notes (a vault): it answers questions
;; from the notes with citations it has checked against the exact text they quote.  This file
;; starts `lode serve' through Eglot for Markdown buffers and adds the commands lode offers
;; beyond standard LSP:
;;
;;   M-x lode-ask       the question on the current line (or the region) is answered below it,
;;                      with citation links;
;;   M-x lode-ask-note  the same, with this note pinned as the context;
;;   M-x lode-status    one line: notes indexed, embedding, scanning.
;;
;; Hover on a citation (`eldoc', or M-x eldoc) shows the quoted span and whether the note still
;; says it; `xref-find-definitions' (M-.) follows it to the cited version.
;;
;; Setup (with `markdown-mode' installed, from MELPA or Debian's elpa-markdown-mode):
;;
;;   (add-to-list 'load-path "/path/to/lode/editors/emacs")
;;   (require 'lode)
;;   (add-hook 'markdown-mode-hook #'eglot-ensure)   ; optional: start lode in every note
;;
;; The vault is the nearest folder holding .lode, .obsidian or .git.  `lode-program' names the
;; binary (default "lode", found on `exec-path').

;;; Code:

(require 'eglot)
(require 'project)
(require 'subr-x)

(defgroup lode nil
  "Ask your markdown notes; every citation checked against the text it quotes."
  :group 'tools
  :prefix "lode-")

(defcustom lode-program "lode"
  "The lode binary: a name on `exec-path', or an absolute file name."
  :type 'string)

(defcustom lode-vault-markers '(".lode" ".obsidian" ".git")
  "Files or folders that mark a vault's root (the nearest one wins)."
  :type '(repeat string))

(defun lode--contact (&rest _)
  "How Eglot starts lode."
  (list lode-program "serve"))

(defun lode--vault-root (dir)
  "The vault holding DIR: the nearest folder with one of `lode-vault-markers'."
  (let ((found nil))
    (dolist (m lode-vault-markers)
      (let ((d (locate-dominating-file dir m)))
        (when (and d (or (null found) (> (length (expand-file-name d)) (length (expand-file-name found)))))
          (setq found d))))
    found))

(defun lode--project (dir)
  "A project for DIR when it lies in a vault, so Eglot starts lode there."
  (when-let ((root (lode--vault-root dir)))
    (cons 'transient (expand-file-name root))))

(add-hook 'project-find-functions #'lode--project)

;; First in the list, so it wins over Eglot's own entry for Markdown (marksman).
(add-to-list 'eglot-server-programs '((markdown-mode gfm-mode) . lode--contact))

(defun lode--server ()
  "The lode server of this buffer, or an error saying how to start it."
  (or (eglot-current-server)
      (user-error "lode is not running for this buffer: M-x eglot (or add eglot-ensure to markdown-mode-hook)")))

(defun lode--range (beg end)
  "BEG..END as an LSP range."
  (list :start (eglot--pos-to-lsp-position beg) :end (eglot--pos-to-lsp-position end)))

(defun lode--ask (beg end pinned)
  "Ask the question BEG..END; PINNED: with this note as the context."
  (unless (buffer-file-name)
    (user-error "lode answers questions in a note saved in a vault"))
  (let ((question (string-trim (buffer-substring-no-properties beg end))))
    (when (string-empty-p question)
      (user-error "No question here: write one on the line, or select it"))
    (message "lode: asking %S…" question)
    ;; The server answers with a workspace edit (the answer under the question), which Eglot
    ;; applies while it waits; the user asked for it, so it is not confirmed again.
    (let ((eglot-confirm-server-initiated-edits nil))
      (eglot-execute-command (lode--server) "lode.ask"
                           (vector (list :uri (eglot--path-to-uri (buffer-file-name))
                                         :range (lode--range beg end)
                                         :pinned (if pinned t :json-false)))))
    (message "lode: answered")))

;;;###autoload
(defun lode-ask (beg end)
  "Ask lode the question on this line (or in the region, BEG..END).
The verified answer, with citation links, is inserted below it."
  (interactive (if (use-region-p)
                   (list (region-beginning) (region-end))
                 (list (line-beginning-position) (line-end-position))))
  (lode--ask beg end nil))

;;;###autoload
(defun lode-ask-note (beg end)
  "Like `lode-ask' (BEG..END), with this note pinned as the context."
  (interactive (if (use-region-p)
                   (list (region-beginning) (region-end))
                 (list (line-beginning-position) (line-end-position))))
  (lode--ask beg end t))

(defun lode-format-status (st)
  "One line from lode/status's result ST (a plist)."
  (let* ((notes (plist-get st :notes))
         (dense (plist-get st :dense))
         (parts (list (format "lode: %s notes" notes))))
    (when (eq (plist-get st :scanning) t)
      (setq parts (append parts (list "scanning"))))
    (cond ((stringp dense)
           (setq parts (append parts (list (if (string-prefix-p "loading" dense) "loading model" "lexical only")))))
          ((and (listp dense) (plist-get dense :lexical_only))
           (setq parts (append parts (list "lexical only")))))
    (string-join parts " · ")))

;;;###autoload
(defun lode-status ()
  "Show one line of what lode holds for this vault."
  (interactive)
  (let* ((st (jsonrpc-request (lode--server) :lode/status nil))
         (line (lode-format-status st)))
    (message "%s" line)
    line))

(provide 'lode)
;;; lode.el ends here
