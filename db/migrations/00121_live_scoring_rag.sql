-- +goose Up
-- A live scorer may score with a RAG metric instead of the judge's grade:
-- faithfulness, answer relevancy, context precision or context recall, on
-- the documents of the feedback's context (or of the best-of-N call the
-- feedback names). Answer relevancy also names the endpoint that embeds.
ALTER TABLE live_scorers DROP CONSTRAINT live_scorers_scorer_check;
ALTER TABLE live_scorers ADD CONSTRAINT live_scorers_scorer_check
    CHECK (scorer IN ('judge', 'faithfulness', 'answer_relevancy', 'context_precision', 'context_recall'));
ALTER TABLE live_scorers ADD COLUMN embeddings_endpoint text NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE live_scorers DROP COLUMN embeddings_endpoint;
DELETE FROM live_scorers WHERE scorer <> 'judge';
ALTER TABLE live_scorers DROP CONSTRAINT live_scorers_scorer_check;
ALTER TABLE live_scorers ADD CONSTRAINT live_scorers_scorer_check CHECK (scorer IN ('judge'));
