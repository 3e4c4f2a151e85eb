-- wrk script: POST /lease/acquire, with no body.
wrk.method = "POST"
wrk.path = "/lease/acquire"
