"""google-genai's ``generate_content`` streams (Gemini API and Vertex AI), sync and async, on every transport it
streams with (httpx2, httpx, aiohttp): ``streams`` (the public stream methods and the generators the caller holds)
and ``wire`` (the request's send and answer, the start of a call, what an exception means)."""
